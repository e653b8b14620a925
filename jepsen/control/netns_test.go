//go:build linux

package control

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// needNetns skips the test unless it can create network namespaces.
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
}

// buildFaultBinary builds cmd/quorate with -tags faultinject into a
// temporary directory.
func buildFaultBinary(t *testing.T, ctx context.Context) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "quorate")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "faultinject", "-o", bin, "./cmd/quorate")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build -tags faultinject: %s", out)
	return bin
}

func namespacesWithPrefix(t *testing.T, prefix string) []string {
	t.Helper()
	names, err := listNetns(context.Background())
	require.NoError(t, err)
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix+"-") {
			out = append(out, n)
		}
	}
	return out
}

// TestNetnsSmoke runs a real 3-node cluster in namespaces and drives every
// kind of fault once: a partition, a pause, a kill -9 and restart, and a
// clock skew, then tears everything down and checks nothing is left.
func TestNetnsSmoke(t *testing.T) {
	needNetns(t)
	_, err := exec.LookPath("curl")
	require.NoError(t, err, "the smoke test checks the network with curl")
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	bin := buildFaultBinary(t, ctx)
	built := time.Since(began)
	prefix := fmt.Sprintf("qt%04x", rand.IntN(1<<16))
	c, err := New(Options{
		Nodes:     3,
		Binary:    bin,
		WorkDir:   t.TempDir(),
		Prefix:    prefix,
		UseNetns:  true,
		ExtraArgs: []string{"--groups", "4", "--raft-timeout", "200ms"},
		Logger:    slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	require.NoError(t, err)
	require.True(t, c.UsesNetns())
	t.Cleanup(func() {
		if err := c.Teardown(context.Background()); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	require.NoError(t, c.Setup(ctx))
	assert.ErrorContains(t, c.Setup(ctx), "already exists", "a second Setup finds the namespaces")
	require.ElementsMatch(t, c.namespaces(), namespacesWithPrefix(t, prefix))

	require.NoError(t, c.StartAll(ctx))
	waitReady := func(what string) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
		defer rcancel()
		require.NoError(t, c.WaitReady(rctx), what)
	}
	waitReady("fresh cluster")
	t.Logf("cluster ready %v after start (build took %v)", time.Since(began)-built, built)
	for i := 1; i <= 3; i++ {
		argv := readCmdline(c.PID(i))
		require.NotEmpty(t, argv, "n%d", i)
		assert.Equal(t, bin, argv[0], "the recorded PID of n%d is the quorate process", i)
	}

	// One decision through the public API, from the client namespace.
	out, err := c.ExecOutput(ctx, c.ClientNS(), "curl", "-sS", "-m", "5", "-X", "POST", "-H", "Authorization: Bearer "+c.Token(),
		"-H", "Content-Type: application/json", "-d", `{"client": "smoke"}`, c.NodeURL(2)+"/v1/allow")
	require.NoError(t, err)
	var allow struct {
		Allowed bool  `json:"allowed"`
		Limit   int64 `json:"limit"`
	}
	require.NoError(t, json.Unmarshal(out, &allow), "%s", out)
	assert.True(t, allow.Allowed, "%s", out)
	out, err = c.ExecOutput(ctx, c.ClientNS(), "curl", "-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", c.NodeURL(2)+"/v1/cluster")
	require.NoError(t, err)
	assert.Equal(t, "401", string(out), "the nodes take tokens: none, no answer")
	// The harness's own client reaches the nodes from this (root) namespace.
	leader, err := c.waitLeader(ctx, "0") // a leadership transfer may be under way
	require.NoError(t, err)
	assert.True(t, leader >= 1 && leader <= 3, "leader %d", leader)

	// Isolate n3: its peers cannot reach it, the client still can.
	reach := func(fromNS string, i int) error {
		return c.Exec(ctx, fromNS, "curl", "-sS", "-m", "1", "-o", "/dev/null", c.NodeURL(i)+"/healthz")
	}
	require.NoError(t, c.Partition(ctx, NemPartitionOne, Isolate([]int{1, 2, 3}, 3)))
	rules, err := c.ExecOutput(ctx, c.NodeNS(3), "iptables", "-S")
	require.NoError(t, err)
	for _, want := range []string{
		"-A INPUT -s 10.77.0.11/32 -j DROP", "-A OUTPUT -d 10.77.0.11/32 -j DROP",
		"-A INPUT -s 10.77.0.12/32 -j DROP", "-A OUTPUT -d 10.77.0.12/32 -j DROP",
	} {
		assert.Contains(t, string(rules), want)
	}
	assert.Error(t, reach(c.NodeNS(1), 3), "n1 must not reach the isolated n3")
	assert.Error(t, reach(c.NodeNS(3), 2), "the isolated n3 must not reach n2")
	assert.NoError(t, reach(c.NodeNS(1), 2), "n1 and n2 are on the same side")
	assert.NoError(t, reach(c.ClientNS(), 3), "the client reaches every node")
	require.NoError(t, c.Heal(ctx))
	require.NoError(t, c.Heal(ctx), "Heal is idempotent")
	assert.NoError(t, reach(c.NodeNS(1), 3), "healed")
	rules, err = c.ExecOutput(ctx, c.NodeNS(3), "iptables", "-S")
	require.NoError(t, err)
	assert.NotContains(t, string(rules), "-A ")

	// Pause and resume n2.
	pid2 := c.PID(2)
	require.NoError(t, c.PauseNodes(ctx, NemPause, 2))
	assert.Equal(t, byte('T'), procState(pid2))
	assert.True(t, c.Paused(2))
	require.NoError(t, c.ResumeAll(ctx))
	assert.NotEqual(t, byte('T'), procState(pid2))
	assert.False(t, c.Paused(2))

	// kill -9 n2 and start it again.
	require.NoError(t, c.KillNodes(ctx, NemKill, 2))
	assert.False(t, alive(pid2), "n2's process is gone")
	assert.False(t, c.Running(2))
	require.NoError(t, c.RestartDown(ctx))
	assert.NotEqual(t, pid2, c.PID(2))
	assert.NotZero(t, c.PID(2))
	waitReady("after restarting n2")

	// Skew n1's clock and read it back from the client namespace.
	require.NoError(t, c.SetClock(ctx, NemClockBump, 1, 250*time.Millisecond))
	out, err = c.ExecOutput(ctx, c.ClientNS(), "curl", "-sS", "-m", "5", "-H", "Authorization: Bearer "+c.Token(), c.DebugURL(1)+"/debug/clock")
	require.NoError(t, err)
	assert.JSONEq(t, `{"offset_ns": 250000000}`, string(out))
	out, err = c.ExecOutput(ctx, c.ClientNS(), "curl", "-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", c.DebugURL(1)+"/debug/clock")
	require.NoError(t, err)
	assert.Equal(t, "401", string(out), "the debug listener serves admin tokens only")
	assert.Equal(t, int64(250e6), c.ClockOffsets()["n1"])
	require.NoError(t, c.ResetClocks(ctx))
	off, err := c.Clock(ctx, 1)
	require.NoError(t, err)
	assert.Zero(t, off)

	var got []string
	for _, e := range c.Events() {
		got = append(got, e.Name+" "+e.Phase)
	}
	assert.Equal(t, []string{
		"partition-one start", "partition-one stop", "pause start", "pause stop",
		"kill start", "kill stop", "clock-bump start", "clock-bump stop",
	}, got)

	var pids []int
	for i := 1; i <= 3; i++ {
		pids = append(pids, c.PID(i))
	}
	require.NoError(t, c.Teardown(ctx))
	require.NoError(t, c.Teardown(ctx), "Teardown is idempotent")
	assert.Empty(t, namespacesWithPrefix(t, prefix), "no namespace is left")
	for _, pid := range pids {
		assert.False(t, alive(pid), "pid %d is gone", pid)
	}
	assert.ErrorIs(t, c.Start(ctx, 1), ErrTornDown)
	t.Logf("smoke test took %v (build %v)", time.Since(began), built)
}

// TestCleanupStale leaves namespaces behind as a crashed run would and
// checks that CleanupStale removes exactly those.
func TestCleanupStale(t *testing.T) {
	needNetns(t)
	ctx := context.Background()
	prefix := fmt.Sprintf("qs%04x", rand.IntN(1<<16))
	other := prefix + "x" // shares the prefix's characters, not the prefix
	names := []string{prefix + "-br", prefix + "-client", prefix + "-n1", prefix + "-n2", other + "-n1"}
	for _, n := range names {
		require.NoError(t, runIP(ctx, "netns", "add", n))
	}
	t.Cleanup(func() {
		for _, n := range names {
			_ = runIP(context.Background(), "netns", "delete", n)
		}
	})
	removed, err := CleanupStale(ctx, prefix)
	require.NoError(t, err)
	assert.ElementsMatch(t, names[:4], removed)
	assert.Empty(t, namespacesWithPrefix(t, prefix))
	assert.Equal(t, []string{other + "-n1"}, namespacesWithPrefix(t, other))

	removed, err = CleanupStale(ctx, prefix)
	require.NoError(t, err)
	assert.Empty(t, removed)
	_, err = CleanupStale(ctx, "bad prefix")
	assert.Error(t, err)
}

// TestNetnsEveryNemesis runs each nemesis of Mix once on a real 5-node
// cluster, checks its effect, stops it, and checks the cluster is whole
// again: every node running and unpaused, no rule left, every clock at 0.
func TestNetnsEveryNemesis(t *testing.T) {
	needNetns(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildFaultBinary(t, ctx)
	prefix := fmt.Sprintf("qe%04x", rand.IntN(1<<16))
	c, err := New(Options{
		Nodes:  5,
		Binary: bin,
		// The roll's mechanics with the same binary: stop, start on
		// UpgradeBinary (make upgrade-test rolls between two releases).
		UpgradeBinary: bin,
		WorkDir:       t.TempDir(),
		Prefix:        prefix,
		UseNetns:      true,
		ExtraArgs:     []string{"--groups", "4", "--raft-timeout", "200ms"},
		Logger:        slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := c.Teardown(context.Background()); err != nil {
			t.Errorf("teardown: %v", err)
		}
		assert.Empty(t, namespacesWithPrefix(t, prefix), "no namespace is left")
	})
	require.NoError(t, c.Setup(ctx))
	require.NoError(t, c.StartAll(ctx))
	waitReady := func(what string) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
		defer rcancel()
		require.NoError(t, c.WaitReady(rctx), what)
	}
	waitReady("fresh cluster")

	running := func() (n int) {
		for i := 1; i <= 5; i++ {
			if c.Running(i) {
				n++
			}
		}
		return n
	}
	paused := func() (n int) {
		for i := 1; i <= 5; i++ {
			if c.Paused(i) {
				n++
			}
		}
		return n
	}
	// dropRules counts each node's DROP rules on INPUT.
	dropRules := func() map[int]int {
		out := map[int]int{}
		for i := 1; i <= 5; i++ {
			rules, err := c.ExecOutput(ctx, c.NodeNS(i), "iptables", "-S", "INPUT")
			require.NoError(t, err)
			out[i] = strings.Count(string(rules), "-j DROP")
		}
		return out
	}
	// cutsPerNode counts, from the last event's cut detail, the peers each
	// node was cut from.
	cutsPerNode := func() map[int]int {
		evs := c.Events()
		out := map[int]int{1: 0, 2: 0, 3: 0, 4: 0, 5: 0}
		for _, pair := range strings.Split(evs[len(evs)-1].Detail["cut"], ",") {
			for _, id := range strings.Split(pair, "|") {
				out[int(id[1]-'0')]++
			}
		}
		return out
	}
	clocks := func() (skewed int) {
		for i := 1; i <= 5; i++ {
			off, err := c.Clock(ctx, i)
			require.NoError(t, err)
			if off != 0 {
				assert.Contains(t, []time.Duration{DefaultClockSkew, DefaultFarClockOffset}, abs(off), "n%d", i)
				skewed++
			}
		}
		return skewed
	}

	checks := []struct {
		name   string
		effect func()
	}{
		{NemKillLeader, func() { assert.Equal(t, 4, running()) }},
		{NemPartitionLeader, func() { assert.Equal(t, cutsPerNode(), dropRules()) }},
		{NemKill, func() { assert.Equal(t, 4, running()) }},
		{NemKillMinority, func() { assert.Equal(t, 3, running()) }},
		{NemPause, func() { assert.Equal(t, 1, paused()) }},
		{NemClockBump, func() { assert.Equal(t, 1, clocks()) }},
		{NemClockStrobe, func() { time.Sleep(120 * time.Millisecond); assert.Equal(t, 1, clocks()) }},
		{NemClockJumpAhead, func() { assert.Equal(t, 1, clocks()) }},
		{NemClockRestartAhead, func() {
			evs := c.Events()
			i := int(evs[len(evs)-1].Detail["node"][1] - '0')
			require.NoError(t, c.waitDebug(ctx))
			off, err := c.Clock(ctx, i)
			require.NoError(t, err)
			assert.Equal(t, DefaultFarClockOffset, off, "n%d started with its clock ahead", i)
			assert.Equal(t, 1, clocks())
			assert.Equal(t, 5, running())
		}},
		{NemLeaveRejoin, func() { assert.Equal(t, 4, running()) }},
		{NemTermLeader, func() { assert.Equal(t, 4, running()) }},
		{NemUpgradeRoll, func() { assert.Equal(t, 4, running()) }},
		{NemPartitionOne, func() { assert.Equal(t, cutsPerNode(), dropRules()) }},
		{NemPartitionHalves, func() { assert.Equal(t, cutsPerNode(), dropRules()) }},
		{NemPartitionRing, func() { assert.Equal(t, map[int]int{1: 2, 2: 2, 3: 2, 4: 2, 5: 2}, dropRules()) }},
		{NemPartitionBridge, func() { assert.Equal(t, cutsPerNode(), dropRules()) }},
	}
	var names []string
	for _, ch := range checks {
		names = append(names, ch.name)
	}
	assert.ElementsMatch(t, NemesisNames(), names, "every nemesis is checked")
	nms, err := c.Mix(rand.New(rand.NewPCG(7, 8)), names...)
	require.NoError(t, err)
	for k, nm := range nms {
		require.NoError(t, nm.Start(ctx), nm.Name)
		checks[k].effect()
		require.NoError(t, nm.Stop(ctx), nm.Name)
		require.NoError(t, nm.Stop(ctx), "%s: Stop is idempotent", nm.Name)
		if strings.HasPrefix(nm.Name, "kill") || nm.Name == NemLeaveRejoin || nm.Name == NemTermLeader || nm.Name == NemClockRestartAhead || nm.Name == NemUpgradeRoll {
			waitReady("after " + nm.Name) // restarted nodes answer; the next nemesis may need a leader
		}
		assert.Equal(t, 5, running(), "after %s", nm.Name)
		assert.Zero(t, paused(), "after %s", nm.Name)
		assert.Equal(t, map[int]int{1: 0, 2: 0, 3: 0, 4: 0, 5: 0}, dropRules(), "after %s", nm.Name)
		assert.Zero(t, clocks(), "after %s", nm.Name)
	}
	evs := c.Events()
	require.Len(t, evs, 2*len(nms))
	for k, nm := range nms {
		assert.Equal(t, []string{nm.Name + " start", nm.Name + " stop"},
			[]string{evs[2*k].Name + " " + evs[2*k].Phase, evs[2*k+1].Name + " " + evs[2*k+1].Phase})
	}
	skew := c.ClockOffsets()
	var maxSkew int64
	for _, v := range skew {
		maxSkew = max(maxSkew, v)
	}
	assert.Equal(t, int64(MaxClockStep), maxSkew, "%v: clock-jump-ahead earns MaxClockStep, clock-restart-ahead nothing", skew)
	t.Logf("every nemesis took %v", time.Since(began))
}
