package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/jepsen/checker"
)

// baseClusterVersion is the cluster version of a cluster that has never
// moved one (every node of the release before versions runs only it).
const baseClusterVersion = 1

// buildRelease builds the quorate binary of git revision rev of repo
// (-tags faultinject) into bin, from `git archive` of rev extracted under
// dir: the working tree and the repository are not touched.
func buildRelease(ctx context.Context, repo, rev, dir, bin string) error {
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", rev)
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	extract.Stdin = pipe
	var archiveErr, extractErr limitedBuffer
	archive.Stderr, extract.Stderr = &archiveErr, &extractErr
	if err := extract.Start(); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	if err := archive.Run(); err != nil {
		_ = extract.Wait()
		return fmt.Errorf("git archive %s (is the repository's history here?): %w\n%s", rev, err, archiveErr.String())
	}
	if err := extract.Wait(); err != nil {
		return fmt.Errorf("tar: %w\n%s", err, extractErr.String())
	}
	build := exec.CommandContext(ctx, "go", "build", "-tags", "faultinject", "-o", bin, "./cmd/quorate")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", rev, err, out)
	}
	return nil
}

// limitedBuffer keeps the first 64 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 1<<16 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }

// clusterView is GET /v1/cluster's answer. A node of the release before
// reports neither version field (they read as 0: the base version).
type clusterView = api.ClusterStatus

// versionOf is the cluster version v reports.
func versionOf(v clusterView) int { return max(int(v.ClusterVersion), baseClusterVersion) }

// versionObs is one node's answer: the cluster version it reported, and
// the latest moment it could have been computed (when it was read).
type versionObs struct {
	at      time.Time
	node    string
	version int
}

// versionWatch polls every node's GET /v1/cluster and records the cluster
// versions they report.
type versionWatch struct {
	hc      *http.Client
	targets []string
	mu      sync.Mutex
	obs     []versionObs
}

func (w *versionWatch) read(ctx context.Context, url string) (clusterView, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/cluster", nil)
	if err != nil {
		return clusterView{}, err
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return clusterView{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return clusterView{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return clusterView{}, fmt.Errorf("GET %s/v1/cluster: %d", url, resp.StatusCode)
	}
	var v clusterView
	return v, json.Unmarshal(body, &v)
}

// run polls every interval until ctx ends.
func (w *versionWatch) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, url := range w.targets {
			if v, err := w.read(ctx, url); err == nil {
				w.mu.Lock()
				w.obs = append(w.obs, versionObs{at: time.Now(), node: url, version: versionOf(v)})
				w.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// settle waits (within ctx) until every node reports one cluster version
// equal to the highest every node runs, and returns the last views read.
func (w *versionWatch) settle(ctx context.Context) (map[string]clusterView, error) {
	for {
		views := map[string]clusterView{}
		var err error
		for _, url := range w.targets {
			var v clusterView
			if v, err = w.read(ctx, url); err != nil {
				break
			}
			views[url] = v
		}
		if err == nil && settled(views) {
			return views, nil
		}
		select {
		case <-ctx.Done():
			return views, fmt.Errorf("the cluster version did not settle: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// settled reports whether every view has the same cluster version, equal
// to the lowest highest version any node runs.
func settled(views map[string]clusterView) bool {
	supported := 0
	for _, v := range views {
		for _, n := range v.Nodes {
			if m := max(int(n.MaxClusterVersion), baseClusterVersion); supported == 0 || m < supported {
				supported = m
			}
		}
	}
	for _, v := range views {
		if versionOf(v) != supported {
			return false
		}
	}
	return len(views) > 0
}

// checkUpgrade judges a rolling upgrade: no node may report a cluster
// version above the base before the last node started on the new binary
// (lastUpgraded), and afterwards every node must report the new binary's
// highest version, above the base (or the roll proved nothing).
func checkUpgrade(obs []versionObs, lastUpgraded time.Time, final map[string]clusterView, settleErr error) checker.Result {
	r := checker.Result{Name: "cluster-version", Valid: true, Summary: map[string]any{"observations": len(obs)}}
	early := 0
	for _, o := range obs {
		if o.version > baseClusterVersion && (lastUpgraded.IsZero() || o.at.Before(lastUpgraded)) {
			early++
			if len(r.Failures) < 10 {
				r.Failures = append(r.Failures, fmt.Sprintf("%s reported cluster version %d at %s, before the last node ran the new binary (%s)",
					o.node, o.version, o.at.Format(time.RFC3339Nano), lastUpgraded.Format(time.RFC3339Nano)))
			}
		}
	}
	r.Summary["early"] = early
	finalVersion := 0
	for _, v := range final {
		finalVersion = versionOf(v)
	}
	r.Summary["final"] = finalVersion
	switch {
	case settleErr != nil:
		r.Failures = append(r.Failures, settleErr.Error())
	case finalVersion <= baseClusterVersion:
		r.Failures = append(r.Failures, fmt.Sprintf("the cluster version stayed at %d after every node was upgraded", finalVersion))
	}
	r.Valid = len(r.Failures) == 0
	return r
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
