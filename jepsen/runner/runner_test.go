package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/quorate/quorate/fsm"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/jepsen/checker"
)

// repoRoot is the module root, where the runner builds quorate.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// needNetns skips when the machine cannot create network namespaces; CI
// runs as root, so there the smoke run always happens.
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the fault suite needs root for network namespaces and iptables")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the fault suite needs iproute2's ip")
	}
}

func smokeConfig(t *testing.T, seed uint64) Config {
	return Config{
		Name: "smoke", Nodes: 3, Duration: 25 * time.Second, Interval: 3 * time.Second,
		Nemeses: []string{"kill-leader", "partition-leader", "clock-bump"},
		Seed:    seed, Out: t.TempDir(), Groups: 4, RaftTimeout: 300 * time.Millisecond,
		Workers: 8, HotKeys: 2, ColdKeys: 50, HotCapacity: 20, HotRate: "10",
		PolicyChanges: true, AccountKeys: 2, UseNetns: true,
		// A prefix of this process's own, so that concurrent test runs on
		// one machine never clean up each other's namespaces.
		Prefix: fmt.Sprintf("qs%d", os.Getpid()%100000), Repo: repoRoot(t),
		Logger: slog.New(slog.DiscardHandler),
	}
}

func result(t *testing.T, s Summary, name string) checker.Result {
	t.Helper()
	for _, r := range s.Results {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no %s result in %+v", name, s.Results)
	return checker.Result{}
}

// TestSmoke is the short fault run of make test: a real 3-node cluster in
// network namespaces, a leader killed, a leader partitioned away and a
// clock skewed under load; every checker must pass.
func TestSmoke(t *testing.T) {
	needNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, err := Run(ctx, smokeConfig(t, 11))
	require.NoError(t, err)
	for _, r := range s.Results {
		assert.True(t, r.Valid, "%s: %v %v", r.Name, r.Summary, r.Failures)
	}
	assert.Greater(t, s.OK, 1000, "the workload made progress")
	assert.Greater(t, s.Faults, 2, "faults were injected")
	assert.Equal(t, 2, result(t, s, "accounting").Summary["keys"], "both accounting keys were read and checked")
	win := result(t, s, "window")
	assert.Equal(t, WindowKeys, win.Summary["keys"], "the window keys were checked as windows")
	assert.Positive(t, win.Summary["admissions"])
	assert.Positive(t, win.Summary["denials"])
	assert.Positive(t, result(t, s, "linearizable").Summary["fill_ops"], "the fill changes reached the model")
	assert.FileExists(t, filepath.Join(s.Dir, "summary.json"))
	assert.FileExists(t, filepath.Join(s.Dir, "history", "ops.jsonl"))
}

// TestNegativeControl runs the unsafe build, which decides on local
// replicas without raft: the checkers must reject it.
func TestNegativeControl(t *testing.T) {
	needNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := smokeConfig(t, 12)
	cfg.Unsafe, cfg.Duration = true, 12*time.Second
	s, err := Run(ctx, cfg)
	require.NoError(t, err)
	assert.False(t, s.Valid, "the unsafe build must fail the suite")
	assert.False(t, result(t, s, "linearizable").Valid, "linearizability must catch local decisions")
	assert.False(t, result(t, s, "over-admission").Valid, "the bound must be exceeded")
}

// TestUpgradeFromThePreviousRelease is the short form of make
// upgrade-test: three nodes of v0.14.0 (commit 67142fb, the last release
// before cluster versions), built from the repository's history, rolled one
// at a time to this tree's binary under load. Every checker must pass, and
// the cluster version must move up only after the last node.
func TestUpgradeFromThePreviousRelease(t *testing.T) {
	needNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := smokeConfig(t, 13)
	cfg.Name, cfg.Nemeses, cfg.UpgradeFrom = "upgrade", []string{"upgrade-roll"}, "67142fb"
	cfg.Duration, cfg.Interval = 30*time.Second, 2*time.Second
	s, err := Run(ctx, cfg)
	require.NoError(t, err)
	for _, r := range s.Results {
		assert.True(t, r.Valid, "%s: %v %v", r.Name, r.Summary, r.Failures)
	}
	assert.Zero(t, result(t, s, "window").Summary["keys"], "no window keys before cluster version 2")
	v := result(t, s, "cluster-version")
	assert.Equal(t, 0, v.Summary["early"], "no node reported the new cluster version before the last node ran the new binary")
	assert.Equal(t, int(fsm.MaxClusterVersion), v.Summary["final"], "every node at the new binary's highest")
	assert.Greater(t, s.OK, 1000, "the workload made progress")
	assert.GreaterOrEqual(t, s.Faults, 3, "every node was rolled")
}

// TestClockRestartAheadStampsNothing runs the fault suite's check of the
// clock guard: nodes restarted with their clocks 2 s ahead (beyond the
// guard's tolerance) under load, with no clock slack for the checkers, so
// that a single decision stamped by such a node fails the stamps checker.
// With --max-clock-offset=-1ns (the guard off) the same run fails it (see
// the README's fault-suite results).
func TestClockRestartAheadStampsNothing(t *testing.T) {
	needNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := smokeConfig(t, 14)
	cfg.Name, cfg.Nemeses = "clock-ahead", []string{"clock-restart-ahead"}
	cfg.Duration, cfg.Interval = 22*time.Second, 3*time.Second
	s, err := Run(ctx, cfg)
	require.NoError(t, err)
	for _, r := range s.Results {
		assert.True(t, r.Valid, "%s: %v %v", r.Name, r.Summary, r.Failures)
	}
	assert.GreaterOrEqual(t, s.Faults, 1, "a node was restarted with its clock ahead")
	assert.EqualValues(t, 0, result(t, s, "stamps").Summary["clock_slack_ms"], "the offset earned no slack")
	assert.Greater(t, s.OK, 1000, "the workload made progress")
}

func TestNodeIDs(t *testing.T) {
	assert.Equal(t, map[string]string{"http://10.77.0.11:7070": "n1", "http://10.77.0.12:7070": "n2"},
		nodeIDs(map[string]string{"node_urls": "n1=http://10.77.0.11:7070,n2=http://10.77.0.12:7070", "nodes": "2"}))
	old := nodeIDs(map[string]string{"nodes": "3"})
	assert.Equal(t, "n3", old["http://10.77.0.13:7070"], "a history written before node_urls: jepsen/control's addresses")
	assert.Equal(t, "n1", old["http://127.0.0.11:7070"])
	assert.Nil(t, nodeIDs(map[string]string{}))
}
