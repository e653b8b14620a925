// Command failover measures how long a quorate cluster started with
// scripts/cluster.sh takes to serve decisions again after the leader of a
// client's data group is killed with SIGKILL.
//
// Each run finds the client's data group (by the hash GET /v1/routes
// documents, "fnv1a64-mod") and its leader (internal/clusterview, as the
// fault suite finds one), probes POST /v1/allow {"client": ..., "cost": 0}
// (a peek) through a surviving node every -interval with the API's Go
// client (client.Node), kills the leader's process (by the PID in its
// pid file) and records the first successful decision whose request was
// sent after the kill and that a new leader made. It then restarts the
// node with `scripts/cluster.sh start N`, waits until every group has 3
// voters and a leader and no leader has moved for 5 s (the cluster hands
// leadership back to the restarted node's preferred groups), and runs
// again.
//
// All traffic goes to loopback (internal/loopback checks every node's
// address); probes are bounded by -timeout per run.
//
//	go run ./scripts/failover -dir cluster-data -runs 5
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/internal/loopback"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

type config struct {
	dir      string
	script   string
	client   string
	runs     int
	interval time.Duration
	timeout  time.Duration
	settle   time.Duration
	jsonOut  bool
	token    string
}

// probeTimeoutMs is the server-side deadline each probe asks for; the
// client-side deadline is a little longer so the server's 503 comes back.
const probeTimeoutMs = 200

func run(args []string, stdout, stderr io.Writer) error {
	var c config
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	fs.StringVar(&c.dir, "dir", "cluster-data", "cluster directory of scripts/cluster.sh (QUORATE_CLUSTER_DIR): nodeN.pid files")
	fs.StringVar(&c.script, "script", "scripts/cluster.sh", "cluster script used to restart a killed node")
	fs.StringVar(&c.client, "client", "failover-probe", "client id to probe; its data group's leader is killed")
	fs.IntVar(&c.runs, "runs", 5, "number of kills (1..100)")
	fs.DurationVar(&c.interval, "interval", 2*time.Millisecond, "probe interval (1ms..1s)")
	fs.DurationVar(&c.timeout, "timeout", 15*time.Second, "longest wait for a decision after a kill, per run (at most 2m)")
	fs.DurationVar(&c.settle, "settle", time.Second, "extra wait once leaders have been stable for 5 s (after startup and after each restart)")
	fs.BoolVar(&c.jsonOut, "json", false, "print the result as JSON")
	fs.StringVar(&c.token, "token", os.Getenv("QUORATE_TOKEN"), "API token (read and decide); default $QUORATE_TOKEN, else the cluster dir's token file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case c.runs < 1 || c.runs > 100:
		return errors.New("-runs must be 1..100")
	case c.interval < time.Millisecond || c.interval > time.Second:
		return errors.New("-interval must be in [1ms, 1s]")
	case c.timeout <= 0 || c.timeout > 2*time.Minute:
		return errors.New("-timeout must be in (0, 2m]")
	case c.settle < 0 || c.settle > time.Minute:
		return errors.New("-settle must be in [0, 1m]")
	case c.client == "":
		return errors.New("-client must not be empty")
	}
	dir, err := filepath.Abs(c.dir)
	if err != nil {
		return err
	}
	c.dir = dir
	if c.token == "" {
		// scripts/cluster.sh keeps its admin token there.
		if b, err := os.ReadFile(filepath.Join(dir, "token")); err == nil {
			c.token = strings.TrimSpace(string(b))
		}
	}

	// INT or TERM ends the measuring, but a killed node is still started
	// again (that is bounded) so the cluster is left whole.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t, err := newTool(ctx, c, stderr)
	if err != nil {
		return err
	}
	t.logf("nodes %s; waiting for a healthy cluster with stable leaders", strings.Join(t.ids(), ","))
	if err := t.waitSettled(); err != nil {
		return err
	}
	var results []runResult
	for i := 1; i <= c.runs && ctx.Err() == nil; i++ {
		r, err := t.runOnce(i)
		if err != nil {
			// A run that could not even be set up (no leader, no pid):
			// report what we have and stop.
			r.Error = err.Error()
			results = append(results, r)
			t.logf("run %d: %v", i, err)
			break
		}
		results = append(results, r)
		if r.Error != "" {
			t.logf("run %d: %s", i, r.Error)
		} else {
			t.logf("run %d: killed %s (group %s), first decision by %s after %.1f ms", i, r.Killed, r.Group, r.NewLeader, r.KillToDecisionMs)
		}
		if r.restartNeeded {
			// cluster.sh takes a live pid (a zombie too) for a running
			// node, so wait until the killed process is reaped.
			if !waitReaped(r.KilledPID, 30*time.Second) {
				return errors.Join(fmt.Errorf("pid %d (%s) not reaped 30 s after SIGKILL", r.KilledPID, r.Killed), report(stdout, c, results))
			}
			if err := t.restart(r.Killed); err != nil {
				return errors.Join(err, report(stdout, c, results))
			}
			if ctx.Err() != nil {
				break
			}
			if err := t.waitSettled(); err != nil {
				return errors.Join(err, report(stdout, c, results))
			}
		}
	}
	if err := report(stdout, c, results); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	for _, r := range results {
		if r.Error != "" {
			return errors.New("some runs failed")
		}
	}
	return nil
}

// node is one cluster member as scripts/cluster.sh lays it out.
type node struct {
	id      string // nodeN
	num     int    // N
	base    string // http://127.0.0.N:7070
	pidFile string
	api     *client.Node // for GET /v1/cluster
}

type tool struct {
	ctx   context.Context // done on INT or TERM
	c     config
	log   io.Writer
	nodes []node
	probe *http.Client // under the probes' client.Node: POST /v1/allow
}

func newTool(ctx context.Context, c config, log io.Writer) (*tool, error) {
	files, err := filepath.Glob(filepath.Join(c.dir, "node*.pid"))
	if err != nil {
		return nil, err
	}
	t := &tool{
		ctx: ctx,
		c:   c,
		log: log,
		probe: &http.Client{Transport: serverTimeout{&http.Transport{
			MaxIdleConnsPerHost: 512,
			IdleConnTimeout:     time.Minute,
			DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		}}},
	}
	status := &http.Client{Timeout: 2 * time.Second}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		n, err := strconv.Atoi(strings.TrimPrefix(name, "node"))
		if err != nil || n < 1 || n > 254 {
			continue
		}
		base := fmt.Sprintf("http://127.0.0.%d:7070", n)
		if err := loopback.CheckURL(base); err != nil {
			return nil, err
		}
		api := client.NewNode(base, status, client.WithToken(c.token))
		t.nodes = append(t.nodes, node{id: name, num: n, base: base, pidFile: f, api: api})
	}
	slices.SortFunc(t.nodes, func(a, b node) int { return a.num - b.num })
	if len(t.nodes) < 3 {
		return nil, fmt.Errorf("found %d node pid files in %s; need a cluster of at least 3 started with scripts/cluster.sh up", len(t.nodes), c.dir)
	}
	return t, nil
}

func (t *tool) logf(format string, args ...any) {
	fmt.Fprintf(t.log, "%s failover: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (t *tool) ids() []string {
	var out []string
	for _, n := range t.nodes {
		out = append(out, n.id)
	}
	return out
}

func (t *tool) byID(id string) (node, bool) {
	for _, n := range t.nodes {
		if n.id == id {
			return n, true
		}
	}
	return node{}, false
}

// stableFor is how long the leaders must stay put before a run: the
// cluster moves leadership of a group at most every 3 s while it
// rebalances leaders onto their preferred nodes.
const stableFor = 5 * time.Second

// sleep waits d or until INT/TERM; it reports whether it was not
// interrupted.
func (t *tool) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-t.ctx.Done():
		return false
	}
}

// waitSettled waits until the cluster is healthy, then (up to 45 s) until
// no group has changed leader for stableFor, then c.settle more.
func (t *tool) waitSettled() error {
	want := min(3, len(t.nodes))
	deadline := time.Now().Add(60 * time.Second)
	why := ""
	for {
		_, healthy, w := t.health(want)
		if healthy {
			break
		}
		why = w
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not healthy after 60 s: %s", why)
		}
		if !t.sleep(200 * time.Millisecond) {
			return t.ctx.Err()
		}
	}
	deadline = time.Now().Add(45 * time.Second)
	var last map[string]string
	since := time.Now()
	for {
		leaders, healthy, w := t.health(want)
		switch {
		case !healthy || leaders == nil:
			last, why = nil, w
			since = time.Now()
		case !maps.Equal(leaders, last):
			last, why = leaders, "leaders still moving"
			since = time.Now()
		case time.Since(since) >= stableFor:
			t.sleep(t.c.settle)
			return t.ctx.Err()
		}
		if time.Now().After(deadline) {
			t.logf("leaders not stable for %s within 45 s (%s); going on", stableFor, why)
			t.sleep(t.c.settle)
			return t.ctx.Err()
		}
		if !t.sleep(250 * time.Millisecond) {
			return t.ctx.Err()
		}
	}
}
