package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/fsm"
)

func startNode(t *testing.T, dir string, clock clock.Clock, mutate ...func(*Options)) *Node {
	t.Helper()
	opts := Options{
		NodeID:          "n1",
		DataDir:         dir,
		RaftAddr:        "127.0.0.1:0",
		GossipAddr:      "127.0.0.1:0",
		Groups:          4,
		Clock:           clock,
		Logger:          slog.New(slog.DiscardHandler),
		ReclaimInterval: -1,
		Raft:            LoopbackRaftTimings,
		Registerer:      prometheus.NewRegistry(),
	}
	for _, m := range mutate {
		m(&opts)
	}
	n, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	require.Eventually(t, func() bool {
		return n.Ready(context.Background()) == nil && n.meta.FSM.Config().Version >= 1
	}, 10*time.Second, 5*time.Millisecond, "node never became ready")
	return n
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func allowOne(t *testing.T, n *Node, client string, cost int64) fsm.Decision {
	t.Helper()
	ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: client, Cost: cost}})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	return ds[0]
}

func setTier(t *testing.T, n *Node, name string, capacity, perSecond int64) api.ConfigChange {
	t.Helper()
	cc, err := n.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: name,
		Policy: bucket.Policy{Capacity: capacity, Rate: perSecond * bucket.Scale}})
	require.NoError(t, err)
	require.Empty(t, cc.Lagging)
	return cc
}

// TestWorkedExampleOnNode runs README.md's worked example ("Try it")
// through a real node: real raft, real log files, an injected clock.
func TestWorkedExampleOnNode(t *testing.T) {
	clock := clock.NewManual()
	n := startNode(t, t.TempDir(), clock, func(o *Options) {
		o.Initial = bucket.Config{Default: bucket.Policy{Capacity: 3, Rate: bucket.Scale}}
	})
	setTier(t, n, "free", 5, 1)
	require.NoError(t, n.SetClientTier(ctx(t), "alice", "free", "ops"))

	type step struct {
		advance   time.Duration
		client    string
		allowed   bool
		remaining int64
		tier      string
	}
	run := func(steps []step) {
		t.Helper()
		for i, s := range steps {
			clock.Advance(s.advance)
			d := allowOne(t, n, s.client, 1)
			assert.Equal(t, s.allowed, d.Allowed, "step %d: allow(%s) = %v, want %v", i, s.client, d.Allowed, s.allowed)
			assert.Equal(t, s.remaining, d.RemainingTokens(), "step %d: remaining", i)
			assert.Equal(t, s.tier, d.Tier, "step %d: tier", i)
		}
	}
	run([]step{
		{0, "alice", true, 4, "free"}, {0, "alice", true, 3, "free"}, {0, "alice", true, 2, "free"},
		{0, "alice", true, 1, "free"}, {0, "alice", true, 0, "free"}, {0, "alice", false, 0, "free"},
		{2 * time.Second, "alice", true, 1, "free"}, {0, "alice", true, 0, "free"}, {0, "alice", false, 0, "free"},
		{0, "bob", true, 2, bucket.DefaultTierName},
	})

	setTier(t, n, "free", 10, 1)
	v, err := n.Client(ctx(t), "alice")
	require.NoError(t, err)
	assert.Equal(t, int64(0), v.Decision.RemainingTokens(), "raising capacity must not gift tokens")
	assert.Equal(t, int64(10), v.Policy.Capacity)

	clock.Advance(4 * time.Second) // balance 4 under capacity 10
	setTier(t, n, "free", 2, 1)
	run([]step{{0, "alice", true, 1, "free"}, {0, "alice", true, 0, "free"}, {0, "alice", false, 0, "free"}})
}

func TestRestartKeepsBalancesTiersAndPolicies(t *testing.T) {
	for _, layout := range []string{LogStoreShared, LogStoreBoltDB} {
		t.Run(layout, func(t *testing.T) { testRestartKeepsState(t, layout) })
	}
}

func testRestartKeepsState(t *testing.T, layout string) {
	dir := t.TempDir()
	clock := clock.NewManual()
	n := startNode(t, dir, clock, func(o *Options) { o.LogStore = layout })
	setTier(t, n, "pro", 100, 0)
	require.NoError(t, n.SetClientTier(ctx(t), "carol", "pro", "ops"))
	for range 30 {
		allowOne(t, n, "carol", 1)
	}
	for i := range 50 {
		allowOne(t, n, fmt.Sprintf("c%d", i), 3)
	}
	before, err := n.Client(ctx(t), "carol")
	require.NoError(t, err)
	require.Equal(t, int64(70), before.Decision.RemainingTokens())
	require.NoError(t, n.Close())

	n2 := startNode(t, dir, clock) // the data dir's layout
	after, err := n2.Client(ctx(t), "carol")
	require.NoError(t, err)
	assert.Equal(t, before.Decision.Remaining, after.Decision.Remaining)
	assert.Equal(t, "pro", after.Tier)
	cfg, err := n2.Config(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, bucket.Policy{Capacity: 100, Rate: 0}, cfg.Tiers["pro"])
	for i := range 50 {
		v, err := n2.Client(ctx(t), fmt.Sprintf("c%d", i))
		require.NoError(t, err)
		assert.Equal(t, int64(7), v.Decision.RemainingTokens(), "client c%d", i)
	}
	d := allowOne(t, n2, "carol", 70)
	assert.True(t, d.Allowed)
	assert.False(t, allowOne(t, n2, "carol", 1).Allowed, "the bucket continues, it is not fresh")
}

func TestConcurrentAllowsNeverOverAdmit(t *testing.T) {
	clock := clock.NewManual()
	n := startNode(t, t.TempDir(), clock)
	setTier(t, n, "fixed", 500, 0)
	require.NoError(t, n.SetClientTier(ctx(t), "hot", "fixed", "ops"))

	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "hot", Cost: 1}})
				if !assert.NoError(t, err) {
					return
				}
				if ds[0].Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(500), admitted.Load(), "1280 requests against capacity 500, rate 0")
}

func TestMixedGroupBatchKeepsOrder(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual())
	var reqs []fsm.AllowRequest
	for i := range 40 {
		reqs = append(reqs, fsm.AllowRequest{Client: fmt.Sprintf("k%d", i%8), Cost: int64(i % 3)})
	}
	ds, err := n.Allow(ctx(t), reqs)
	require.NoError(t, err)
	require.Len(t, ds, len(reqs))
	// Replay the same requests against a plain bucket per client.
	want := map[string]int64{}
	for i, r := range reqs {
		bal, ok := want[r.Client]
		if !ok {
			bal = bucket.BuiltinDefault.Capacity
		}
		if bal >= r.Cost {
			bal -= r.Cost
		}
		want[r.Client] = bal
		assert.Equal(t, bal, ds[i].RemainingTokens(), "request %d (%s cost %d)", i, r.Client, r.Cost)
	}
}

func TestDuplicateRequestIDTakesNothing(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual())
	req := []fsm.AllowRequest{{Client: "dave", Cost: 4, RequestID: "r-1"}}
	first, err := n.Allow(ctx(t), req)
	require.NoError(t, err)
	again, err := n.Allow(ctx(t), req)
	require.NoError(t, err)
	assert.True(t, again[0].Duplicate)
	assert.Equal(t, first[0].Remaining, again[0].Remaining)
	v, err := n.Client(ctx(t), "dave")
	require.NoError(t, err)
	assert.Equal(t, int64(6), v.Decision.RemainingTokens())
}

func TestConfigChangeReachesEveryGroup(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual())
	cc := setTier(t, n, "free", 5, 1)
	assert.Len(t, cc.Applied, 4)
	for _, g := range n.groups {
		assert.Equal(t, cc.Version, g.FSM.Config().Version, "group %s", g.ID)
		assert.Equal(t, bucket.Policy{Capacity: 5, Rate: bucket.Scale}, g.FSM.Config().Tiers["free"], "group %s", g.ID)
	}
	_, err := n.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: 0}})
	assert.ErrorIs(t, err, bucket.ErrInvalidPolicy)
	_, err = n.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "nope"})
	assert.ErrorIs(t, err, fsm.ErrNoSuchTier)
	cfg, err := n.Config(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, cc.Version, cfg.Version, "refused changes must not bump the version")
}

func TestDataDirRemembersGroupCount(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, clock.NewManual())
	require.NoError(t, n.Close())
	_, err := New(Options{NodeID: "n1", DataDir: dir, Groups: 8, Logger: slog.New(slog.DiscardHandler), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0"})
	assert.ErrorContains(t, err, "created with 4 groups")
	_, err = New(Options{NodeID: "other", DataDir: dir, Groups: 4, Logger: slog.New(slog.DiscardHandler), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0"})
	assert.ErrorContains(t, err, "belongs to node")
}

func TestDataDirRemembersLogStore(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewManual()
	n := startNode(t, dir, clock, func(o *Options) { o.LogStore = LogStoreBoltDB })
	allowOne(t, n, "dora", 2)
	require.NoError(t, n.Close())
	open := func(layout string) (*Node, error) {
		return New(Options{NodeID: "n1", DataDir: dir, LogStore: layout, // Groups: the data dir's
			Clock: clock, Logger: slog.New(slog.DiscardHandler),
			RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Raft: LoopbackRaftTimings, ReclaimInterval: -1})
	}
	_, err := open(LogStoreShared)
	assert.ErrorContains(t, err, `created with log store "boltdb", not "shared"`)

	// A quorate.json from before the layout was recorded means boltdb.
	path := filepath.Join(dir, "quorate.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"node_id": "n1", "groups": 4}`), 0o644))
	_, err = open(LogStoreShared)
	assert.ErrorContains(t, err, `created with log store "boltdb"`)
	n, err = open("")
	require.NoError(t, err)
	defer n.Close()
	require.Eventually(t, func() bool { return n.Ready(context.Background()) == nil }, 10*time.Second, 5*time.Millisecond)
	v, err := n.Client(ctx(t), "dora")
	require.NoError(t, err)
	assert.Equal(t, bucket.BuiltinDefault.Capacity-2, v.Decision.RemainingTokens(), "the boltdb log was reopened, not replaced")

	_, err = open("rocksdb")
	assert.ErrorContains(t, err, "log store must be")
}

func TestWALSyncIntervalIsBoundedAndSpacedNodesDecide(t *testing.T) {
	open := func(dir string, interval time.Duration) (*Node, error) {
		return New(Options{NodeID: "n1", DataDir: dir, Groups: 2, WALSyncInterval: interval, Logger: slog.New(slog.DiscardHandler),
			RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Clock: clock.NewManual()})
	}
	for _, bad := range []time.Duration{-time.Microsecond, MaxWALSyncInterval + time.Microsecond} {
		dir := t.TempDir()
		_, err := open(dir, bad)
		assert.ErrorContains(t, err, "WAL sync interval must be", "%s", bad)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries, "a refused interval (%s) wrote nothing", bad)
	}

	n := startNode(t, t.TempDir(), clock.NewManual(), func(o *Options) { o.WALSyncInterval = 2 * time.Millisecond })
	for i := range 3 {
		d := allowOne(t, n, "spaced", 1)
		assert.Equal(t, bucket.BuiltinDefault.Capacity-int64(i+1), d.RemainingTokens(), "decision %d behind a spaced fsync", i)
	}
}

func TestMissingClusterFileIsNotANewDataDir(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, clock.NewManual())
	require.NoError(t, n.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, "quorate.json")))
	_, err := New(Options{NodeID: "n1", DataDir: dir, Groups: 4, Logger: slog.New(slog.DiscardHandler), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0"})
	assert.ErrorContains(t, err, "holds raft state but no quorate.json")
}

// A quorate.json whose group count was lowered by hand no longer describes
// the data dir: clients would hash to groups holding none of their state.
func TestClusterFileCheckedAgainstGroups(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, clock.NewManual()) // 4 groups
	require.NoError(t, n.Close())
	path := filepath.Join(dir, "quorate.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), `"groups": 4`, `"groups": 2`, 1)), 0o644))
	_, err = New(Options{NodeID: "n1", DataDir: dir, Logger: slog.New(slog.DiscardHandler), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0"})
	assert.ErrorContains(t, err, "holds group 2, but its quorate.json records 2 groups")
}

func TestInvalidInitialDefaultRefused(t *testing.T) {
	_, err := New(Options{NodeID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Initial: bucket.Config{Default: bucket.Policy{Capacity: -1}}})
	assert.ErrorIs(t, err, bucket.ErrInvalidPolicy)
}

// A snapshot truncates each group's log in the store (a range tombstone in
// the shared layout), and a restart rebuilds balances from the snapshot and
// the entries after it.
func TestSnapshotTruncatesLogAndRestartRestores(t *testing.T) {
	for _, layout := range []string{LogStoreShared, LogStoreBoltDB} {
		t.Run(layout, func(t *testing.T) {
			dir := t.TempDir()
			clock := clock.NewManual()
			timings := LoopbackRaftTimings
			timings.TrailingLogs = 10
			n := startNode(t, dir, clock, func(o *Options) { o.LogStore = layout; o.Raft = timings })
			setTier(t, n, "fixed", 1000, 0)
			require.NoError(t, n.SetClientTier(ctx(t), "eve", "fixed", "ops"))
			g := n.groupFor("eve")
			for range 300 {
				allowOne(t, n, "eve", 1)
			}
			require.NoError(t, g.Raft.Snapshot().Error())
			first, err := g.Store.FirstIndex()
			require.NoError(t, err)
			last, err := g.Store.LastIndex()
			require.NoError(t, err)
			assert.Greater(t, first, uint64(250), "the snapshot truncated the log to its trailing entries")
			assert.GreaterOrEqual(t, last, uint64(300))
			var l raft.Log
			assert.ErrorIs(t, g.Store.GetLog(first-1, &l), raft.ErrLogNotFound)
			for range 50 {
				allowOne(t, n, "eve", 1)
			}
			require.NoError(t, n.Close())

			n2 := startNode(t, dir, clock)
			v, err := n2.Client(ctx(t), "eve")
			require.NoError(t, err)
			assert.Equal(t, int64(650), v.Decision.RemainingTokens(), "snapshot plus log after it")
		})
	}
}

// The first decisions of a new cluster use its configured default, never
// the built-in one: a data group decides only once the configuration is in
// its log.
func TestFirstDecisionsUseTheConfiguredDefault(t *testing.T) {
	n, err := New(Options{NodeID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		Groups: 4, Logger: slog.New(slog.DiscardHandler), Raft: LoopbackRaftTimings, ReclaimInterval: -1,
		Initial: bucket.Config{Default: bucket.Policy{Capacity: 1000, Rate: 0}}})
	require.NoError(t, err)
	defer n.Close()
	// No waiting for readiness: ask at once, in every group.
	reqs := make([]fsm.AllowRequest, 64)
	for i := range reqs {
		reqs[i] = fsm.AllowRequest{Client: fmt.Sprintf("first-%d", i), Cost: 1}
	}
	ds, err := n.Allow(ctx(t), reqs)
	require.NoError(t, err)
	for i, d := range ds {
		assert.Equal(t, int64(1000), d.Limit, "decision %d used capacity %d", i, d.Limit)
	}
}

// A peer's internal RPC is checked like a caller's request before anything
// is proposed: a forged set-tier or allow with a 300-byte client id, or an
// allow sent to a group that does not own the client, is refused, and the
// node (every replica, had it been committed) keeps serving.
func TestForgedInternalRPCsAreRefused(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual())
	long := strings.Repeat("c", 300)

	_, err := peerrpc.Call[struct{}](ctx(t), n.rpc, n.RaftAddr(), "/internal/set-tier", peerrpc.ClientReq{Client: long, Tier: "free"})
	assert.ErrorIs(t, err, fsm.ErrInvalidCommand, "set-tier with a 300-byte client id")

	other := 0
	for GroupOf("alice", len(n.groups)) == other {
		other++
	}
	resp := forwardAsPeer(t, n, peerrpc.AllowReq{Items: []peerrpc.AllowItem{
		{Group: GroupOf(long, len(n.groups)), Requests: []fsm.AllowRequest{{Client: long, Cost: 1}}},
		{Group: other, Requests: []fsm.AllowRequest{{Client: "alice", Cost: 1}}},
		{Group: len(n.groups) + 3, Requests: []fsm.AllowRequest{{Client: "alice", Cost: 1}}},
		{Group: GroupOf("alice", len(n.groups)), Requests: []fsm.AllowRequest{{Client: "alice", Cost: bucket.MaxCost + 1}}},
	}})
	require.Len(t, resp.Items, 4)
	for i, it := range resp.Items {
		if assert.NotNil(t, it.Error, "item %d was decided", i) {
			assert.ErrorIs(t, it.Error.Err(), fsm.ErrInvalidCommand, "item %d", i)
		}
	}

	d := allowOne(t, n, "alice", 1)
	assert.True(t, d.Allowed)
	assert.Equal(t, bucket.BuiltinDefault.Capacity-1, d.RemainingTokens(), "nothing was taken from alice before")

	_, err = New(Options{NodeID: "n2", DataDir: t.TempDir(), MaxBatch: fsm.MaxBatch + 1})
	assert.ErrorContains(t, err, "max batch must be at most")
}

// A configuration push is only a hint: a forged push of version 2^64-1
// with limits turned off installs nothing, because data groups install only
// what the meta group committed.
func TestForgedConfigPushInstallsNothing(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual())
	want := n.meta.FSM.Config()
	require.NotZero(t, want.Version)
	forged := bucket.Config{Version: math.MaxUint64, Default: bucket.Policy{Capacity: bucket.MaxCapacity, Rate: bucket.MaxRate}}
	_, err := peerrpc.Call[struct{}](ctx(t), n.rpc, n.RaftAddr(), "/internal/install-config", forged)
	require.NoError(t, err, "the hint itself is accepted")
	n.reconcile() // what the hint triggers, run to completion here

	for _, g := range n.groups {
		assert.Equal(t, want.Version, g.FSM.ConfigVersion(), "group %s", g.ID)
	}
	d := allowOne(t, n, "mallory", 1)
	assert.Equal(t, bucket.BuiltinDefault.Capacity, d.Limit, "the forged default is not in force")

	// A real change still reaches every group, hint or not.
	cc := setTier(t, n, "pro", 50, 0)
	n.reconcile()
	for _, g := range n.groups {
		assert.Equal(t, cc.Version, g.FSM.ConfigVersion(), "group %s", g.ID)
	}
}

// Items forwarded together each keep their own caller's deadline: an item
// whose deadline has passed is not proposed, however late the others' are.
func TestForwardedItemsKeepTheirOwnDeadline(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual())
	late, early := "late-caller", "early-caller"
	resp := forwardAsPeer(t, n, peerrpc.AllowReq{Items: []peerrpc.AllowItem{
		{Group: GroupOf(early, len(n.groups)), Requests: []fsm.AllowRequest{{Client: early, Cost: 4}},
			Deadline: time.Now().Add(-time.Second).UnixNano()},
		{Group: GroupOf(late, len(n.groups)), Requests: []fsm.AllowRequest{{Client: late, Cost: 4}},
			Deadline: time.Now().Add(time.Minute).UnixNano()},
	}})
	require.Len(t, resp.Items, 2)
	assert.NotNil(t, resp.Items[0].Error, "the item past its deadline was decided")
	if assert.Nil(t, resp.Items[1].Error) {
		assert.True(t, resp.Items[1].Decisions[0].Allowed)
	}
	v, err := n.Client(ctx(t), early)
	require.NoError(t, err)
	assert.Equal(t, bucket.BuiltinDefault.Capacity, v.Decision.RemainingTokens(), "nothing was taken for the expired item")
}

// The node's metrics include the log's fsyncs and the request ids forgotten
// early, per group.
func TestNodeMetricsIncludeSyncsAndEarlyEvictions(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual())
	allowOne(t, n, "mia", 1)
	families, err := n.opts.Registerer.(*prometheus.Registry).Gather()
	require.NoError(t, err)
	got := map[string]int{}
	var syncs, byOrigin float64
	for _, mf := range families {
		got[mf.GetName()] = len(mf.GetMetric())
		switch mf.GetName() {
		case "quorate_log_syncs_total":
			syncs = mf.GetMetric()[0].GetCounter().GetValue()
		case "quorate_requests_remembered":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "by" && l.GetValue() == "origin" {
						byOrigin += m.GetGauge().GetValue()
					}
				}
			}
		}
	}
	assert.Equal(t, 1, got["quorate_log_syncs_total"])
	assert.Positive(t, syncs, "a decision was fsynced")
	assert.Equal(t, len(n.groups)+1, got["quorate_request_ids_evicted_early_total"], "one series per group")
	assert.Equal(t, 2*(len(n.groups)+1), got["quorate_requests_remembered"], "by request id and by origin, per group")
	assert.Equal(t, 1.0, byOrigin, "the decision without a request id is remembered by its origin")
}

// A forwarded write that arrives after its caller's deadline is not
// proposed: the caller has been told its outcome is unknown, and a late
// proposal could still take effect behind its back.
func TestForwardedWritesPastTheirDeadlineAreNotProposed(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual())
	// post sends body as a peer whose caller's deadline is deadline.
	post := func(path string, body any, deadline time.Time) *peerrpc.Error {
		t.Helper()
		data, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, "http://"+n.RaftAddr()+path, bytes.NewReader(data))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(peerrpc.DeadlineHeader, strconv.FormatInt(deadline.UnixNano(), 10))
		resp, err := n.rpc.HTTP.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out peerrpc.Resp[json.RawMessage]
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out.Error
	}
	g := n.groupFor("carol")
	require.Nil(t, post("/internal/set-tier", peerrpc.ClientReq{Client: "carol", Tier: "pro"}, time.Now().Add(time.Minute)))
	last := g.Raft.LastIndex()

	past := time.Now().Add(-time.Second)
	assert.NotNil(t, post("/internal/set-tier", peerrpc.ClientReq{Client: "carol", Tier: "free"}, past), "a set-tier past its deadline was answered as done")
	op := fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "late", Policy: bucket.Policy{Capacity: 1, Rate: bucket.Scale}}
	assert.NotNil(t, post("/internal/config-op", peerrpc.ToWireConfigOp(op), past), "a config op past its deadline was answered as done")

	assert.Equal(t, last, g.Raft.LastIndex(), "nothing was appended after the deadline")
	v, err := n.Client(ctx(t), "carol")
	require.NoError(t, err)
	assert.Equal(t, "pro", v.AssignedTier)
	cfg, err := n.Config(ctx(t))
	require.NoError(t, err)
	assert.NotContains(t, cfg.Tiers, "late")
}

// forwardAsPeer sends req to n's forwarding method as a peer would.
func forwardAsPeer(t *testing.T, n *Node, req peerrpc.AllowReq) peerrpc.AllowResp {
	t.Helper()
	data, err := n.forward(ctx(t), n.RaftAddr(), peerrpc.AppendAllowReq(nil, req))
	require.NoError(t, err)
	resp, err := peerrpc.DecodeAllowResp(data)
	require.NoError(t, err)
	return resp
}
