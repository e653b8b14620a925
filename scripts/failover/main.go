// Command failover measures how long a quorate cluster started with
// scripts/cluster.sh takes to serve decisions again after the leader of a
// client's data group is killed with SIGKILL.
//
// Each run finds the client's group (cluster.GroupOf) and its leader, probes
// POST /v1/allow {"client": ..., "cost": 0} (a peek) through a surviving
// node every -interval, kills the leader's process (by the PID in its pid
// file) and records the first successful decision whose request was sent
// after the kill and that a new leader made. It then restarts the node with
// `scripts/cluster.sh start N`, waits until every group has 3 voters and a
// leader and no leader has moved for 5 s (the cluster hands leadership back
// to the restarted node's preferred groups), and runs again.
//
// All traffic goes to loopback; probes are bounded by -timeout per run.
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
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/transport/httpapi"
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
}

type tool struct {
	ctx    context.Context // done on INT or TERM
	c      config
	log    io.Writer
	nodes  []node
	status *http.Client // /v1/cluster
	probe  *http.Client // /v1/allow
}

func newTool(ctx context.Context, c config, log io.Writer) (*tool, error) {
	files, err := filepath.Glob(filepath.Join(c.dir, "node*.pid"))
	if err != nil {
		return nil, err
	}
	t := &tool{
		ctx:    ctx,
		c:      c,
		log:    log,
		status: &http.Client{Transport: httpapi.BearerTransport(http.DefaultTransport, c.token), Timeout: 2 * time.Second},
		probe: &http.Client{Transport: httpapi.BearerTransport(&http.Transport{
			MaxIdleConnsPerHost: 512,
			IdleConnTimeout:     time.Minute,
			DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		}, c.token)},
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		n, err := strconv.Atoi(strings.TrimPrefix(name, "node"))
		if err != nil || n < 1 || n > 254 {
			continue
		}
		base := fmt.Sprintf("http://127.0.0.%d:7070", n)
		if err := checkLoopback(base); err != nil {
			return nil, err
		}
		t.nodes = append(t.nodes, node{id: name, num: n, base: base, pidFile: f})
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

type runResult struct {
	Run       int    `json:"run"`
	Client    string `json:"client"`
	Group     string `json:"group"`
	Killed    string `json:"killed"`
	KilledPID int    `json:"killed_pid"`
	OldTerm   uint64 `json:"old_term"`
	Via       string `json:"via"`
	NewLeader string `json:"new_leader,omitempty"`
	NewTerm   uint64 `json:"new_term,omitempty"`
	// KillToDecisionMs is from the kill to the answer of the first
	// decision made by the new leader.
	KillToDecisionMs float64 `json:"kill_to_first_decision_ms"`
	// KillToSentMs is when, after the kill, that request was sent.
	KillToSentMs float64 `json:"kill_to_first_decision_sent_ms"`
	// UnavailableMs is from the last answer decided by the old leader to
	// the first decided by the new one.
	UnavailableMs float64 `json:"unavailable_ms"`
	Probes        int     `json:"probes"`
	FailedProbes  int     `json:"failed_probes"`
	FirstFailure  string  `json:"first_failure,omitempty"`
	// LastFailedSentMs is when, after the kill, the last failed probe was
	// sent; Failures counts the failures after the kill by kind.
	LastFailedSentMs float64                 `json:"last_failed_sent_ms,omitempty"`
	Failures         map[string]*failureKind `json:"failures,omitempty"`
	Error            string                  `json:"error,omitempty"`

	restartNeeded bool
}

// failureKind summarizes the failed probes of one kind (HTTP status and
// error code, or "transport"): how many, and how long they took.
type failureKind struct {
	Count int     `json:"count"`
	MinMs float64 `json:"min_ms"`
	MaxMs float64 `json:"max_ms"`
}

type probeResult struct {
	sent, done time.Time
	ok         bool
	stamp      int64
	kind       string // of a failure
	err        string
}

// runOnce kills the leader of the client's group once and measures.
func (t *tool) runOnce(i int) (runResult, error) {
	r := runResult{Run: i, Client: t.c.client}
	views := t.views(t.nodes)
	if len(views) == 0 {
		return r, errors.New("no node answers GET /v1/cluster")
	}
	groups := 0
	for _, st := range views {
		groups = max(groups, dataGroups(st))
	}
	if groups == 0 {
		return r, errors.New("no data groups in GET /v1/cluster")
	}
	r.Group = strconv.Itoa(cluster.GroupOf(t.c.client, groups))
	leader, term, ok := leaderOf(views, r.Group)
	if !ok {
		return r, fmt.Errorf("group %s has no leader the nodes agree on", r.Group)
	}
	r.Killed, r.OldTerm = leader, term
	victim, ok := t.byID(leader)
	if !ok {
		return r, fmt.Errorf("group %s is led by %q, which is not a node in %s", r.Group, leader, t.c.dir)
	}
	// Probe through a survivor, a different one each run when there are
	// several.
	var survivors []node
	for _, n := range t.nodes {
		if n.id != victim.id {
			if _, up := views[n.id]; up {
				survivors = append(survivors, n)
			}
		}
	}
	if len(survivors) == 0 {
		return r, errors.New("no surviving node answers")
	}
	via := survivors[(i-1)%len(survivors)]
	r.Via = via.id
	pid, err := checkPID(victim)
	if err != nil {
		return r, err
	}
	r.KilledPID = pid

	p := newProber(t.ctx, t.probe, via.base+"/v1/allow", t.c.client, t.c.interval, t.c.timeout+2*time.Second)
	p.start()
	// Warm up: the probe must be getting answers before the kill, or there
	// is nothing to compare with.
	if !p.waitSuccesses(5, 3*time.Second) {
		p.stop()
		return r, fmt.Errorf("probes through %s get no answers before the kill: %s", via.id, p.firstFailure())
	}
	if t.ctx.Err() != nil {
		p.stop()
		return r, t.ctx.Err()
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		p.stop()
		return r, fmt.Errorf("kill -9 %d (%s): %w", pid, victim.id, err)
	}
	tKill := time.Now()
	r.restartNeeded = true
	t.logf("run %d: kill -9 %s (pid %d), leader of group %s (term %d); probing via %s", i, victim.id, pid, r.Group, term, via.id)
	found := p.waitNewDecision(tKill, t.c.timeout)
	p.stop()
	if !waitGone(pid, 2*time.Second) {
		t.logf("run %d: pid %d still present 2 s after SIGKILL", i, pid)
	}

	probes := p.results()
	r.Probes = len(probes)
	var first, lastOld *probeResult
	for k := range probes {
		pr := &probes[k]
		if !pr.ok {
			r.FailedProbes++
			if !pr.sent.After(tKill) {
				continue
			}
			if r.FirstFailure == "" {
				r.FirstFailure = pr.err
			}
			r.LastFailedSentMs = max(r.LastFailedSentMs, ms(pr.sent.Sub(tKill)))
			if r.Failures == nil {
				r.Failures = map[string]*failureKind{}
			}
			d := ms(pr.done.Sub(pr.sent))
			if f := r.Failures[pr.kind]; f == nil {
				r.Failures[pr.kind] = &failureKind{Count: 1, MinMs: d, MaxMs: d}
			} else {
				f.Count++
				f.MinMs, f.MaxMs = min(f.MinMs, d), max(f.MaxMs, d)
			}
			continue
		}
		if pr.stamp <= tKill.UnixNano() {
			if lastOld == nil || pr.done.After(lastOld.done) {
				lastOld = pr
			}
			continue
		}
		if pr.sent.After(tKill) && (first == nil || pr.done.Before(first.done)) {
			first = pr
		}
	}
	if t.ctx.Err() != nil && !found {
		r.Error = "interrupted"
		return r, nil
	}
	if !found || first == nil {
		r.Error = fmt.Sprintf("no decision within %s after the kill (%d probes, %d failed; first failure: %s)", t.c.timeout, r.Probes, r.FailedProbes, r.FirstFailure)
		return r, nil
	}
	r.KillToDecisionMs = ms(first.done.Sub(tKill))
	r.KillToSentMs = ms(first.sent.Sub(tKill))
	if lastOld != nil {
		r.UnavailableMs = ms(first.done.Sub(lastOld.done))
	}

	// After the fact: the group must now be led by another node, in a
	// later term.
	deadline := time.Now().Add(5 * time.Second)
	for {
		vs := t.views(survivors)
		if l, term, ok := leaderOf(vs, r.Group); ok && l != victim.id {
			r.NewLeader, r.NewTerm = l, term
			break
		}
		if time.Now().After(deadline) {
			r.Error = fmt.Sprintf("a decision came back after the kill, but the survivors do not report a new leader of group %s", r.Group)
			return r, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.NewTerm <= r.OldTerm {
		r.Error = fmt.Sprintf("group %s: new leader %s in term %d, not after the killed leader's term %d", r.Group, r.NewLeader, r.NewTerm, r.OldTerm)
	}
	return r, nil
}

// checkLoopback refuses any base URL that is not a loopback IP address.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address", raw)
	}
	return nil
}
