package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorate/quorate/internal/freeport"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/transport/peertls"
	"github.com/quorate/quorate/transport/peertls/peertlstest"
)

// testCluster runs nodes in this process over real loopback sockets, each
// with its own data dir; nodes can be stopped and restarted on the same
// addresses.
type testCluster struct {
	t      *testing.T
	clock  clock.Clock
	clocks map[int]clock.Clock // per-node clocks replacing clock, if set
	// maxCV: per-node highest cluster versions claimed (Options.maxClusterVersion).
	maxCV     map[int]uint32
	groups    int
	partition *Partition
	nodes     []*Node
	dirs      []string
	raft      []string
	gossip    []string
	deadAfter time.Duration
	// timings replace LoopbackRaftTimings, if set.
	timings *RaftTimings
	// pki, if set, gives every node a cluster certificate it signs, and
	// gossipKeys encrypt gossip.
	pki        *peertls.Authority
	gossipKeys [][]byte
}

// runLoad runs fn(w, i) for i = 0, 1, .. in each of workers goroutines, up
// to maxOps calls each, until the returned stop is called; stop waits for
// them. It also runs at the test's cleanup, before the cluster's nodes
// close: a failed require must not leave workers spinning against closed
// nodes for the rest of the package's tests.
func runLoad(t *testing.T, workers, maxOps int, fn func(w, i int)) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < maxOps; i++ {
				select {
				case <-done:
					return
				default:
				}
				fn(w, i)
			}
		}()
	}
	var once sync.Once
	stop = func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
	t.Cleanup(stop)
	return stop
}

func newTestCluster(t *testing.T, size int) *testCluster {
	tc := &testCluster{t: t, clock: clock.NewManual(), groups: 6, partition: &Partition{}, deadAfter: time.Hour}
	for range size {
		tc.addNode()
	}
	tc.waitStable(size)
	return tc
}

// addNode starts one more node; every node but the first joins the first.
func (tc *testCluster) addNode() *Node {
	tc.t.Helper()
	i := len(tc.nodes)
	tc.dirs = append(tc.dirs, tc.t.TempDir())
	tc.raft = append(tc.raft, freeport.Addr(tc.t))
	tc.gossip = append(tc.gossip, freeport.Addr(tc.t))
	tc.nodes = append(tc.nodes, nil)
	tc.start(i)
	return tc.nodes[i]
}

func (tc *testCluster) start(i int) {
	tc.t.Helper()
	var join []string
	for j, g := range tc.gossip {
		if j != i && (tc.nodes[j] != nil || i == 0) {
			join = append(join, g)
		}
	}
	if i == 0 && len(tc.nodes) == 1 {
		join = nil
	}
	level := slog.Level(100)
	if os.Getenv("QUORATE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	var tlsConf *peertls.Config
	if tc.pki != nil {
		tlsConf = peertlstest.Node(tc.t, tc.pki, fmt.Sprintf("n%d", i+1))
	}
	n, err := New(Options{
		TLS:               tlsConf,
		GossipKeys:        tc.gossipKeys,
		NodeID:            fmt.Sprintf("n%d", i+1),
		DataDir:           tc.dirs[i],
		RaftAddr:          tc.raft[i],
		HTTPAddr:          tc.httpAddr(i),
		GossipAddr:        tc.gossip[i],
		Join:              join,
		Groups:            tc.groups,
		Clock:             cmp.Or(tc.clocks[i], tc.clock),
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		RaftLogLevel:      level,
		ReclaimInterval:   -1,
		Raft:              *cmp.Or(tc.timings, &LoopbackRaftTimings),
		DeadAfter:         tc.deadAfter,
		PlacementInterval: 50 * time.Millisecond,
		partition:         tc.partition,
		maxClusterVersion: tc.maxCV[i],
	})
	require.NoError(tc.t, err)
	tc.nodes[i] = n
	tc.t.Cleanup(func() { _ = n.Close() })
}

// httpAddr is node i's advertised HTTP address (nothing listens on it: the
// cluster package serves no HTTP API).
func (tc *testCluster) httpAddr(i int) string { return fmt.Sprintf("127.0.0.%d:7070", 100+i) }

func (tc *testCluster) stop(i int) {
	tc.t.Helper()
	require.NoError(tc.t, tc.nodes[i].Close())
	tc.nodes[i] = nil
}

func (tc *testCluster) live() []*Node {
	var out []*Node
	for _, n := range tc.nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// waitStable waits until every group has min(3, voters) voters, all live, a
// leader that serves and is the group's preferred leader (so placement
// moves no leader under the test's load), and every live node is ready.
func (tc *testCluster) waitStable(voters int) {
	tc.t.Helper()
	want := min(3, voters)
	require.Eventually(tc.t, func() bool {
		live := tc.live()
		liveIDs := map[string]bool{}
		var ids, groupIDs []string
		for _, n := range live {
			liveIDs[n.opts.NodeID] = true
			ids = append(ids, n.opts.NodeID)
			if n.Ready(context.Background()) != nil {
				return false
			}
		}
		for _, g := range live[0].allGroups() {
			groupIDs = append(groupIDs, g.ID)
		}
		slices.Sort(ids)
		preferred := membership.PreferredLeaders(groupIDs, ids, DefaultReplicas)
		for gi := range tc.groups + 1 {
			var leader *raftgroup.Group
			var leaderID string
			for _, n := range live {
				if g := n.allGroups()[gi]; g.Serving() {
					leader, leaderID = g, n.opts.NodeID
				}
			}
			if leader == nil || leaderID != preferred[leader.ID] {
				return false
			}
			vs := raftgroup.VoterIDs(leader.Raft.GetConfiguration().Configuration())
			if len(vs) != want {
				return false
			}
			for _, v := range vs {
				if !liveIDs[v] {
					return false
				}
			}
		}
		return true
	}, 60*time.Second, 20*time.Millisecond, "cluster never became stable with %d voters per group", want) // a bound, not a wait: generous for machines running other tests
}

// leaderOfClient returns the index of the node serving client's group.
func (tc *testCluster) leaderOfClient(client string) int {
	gi := GroupOf(client, tc.groups)
	for i, n := range tc.nodes {
		if n != nil && n.groups[gi].Serving() {
			return i
		}
	}
	return -1
}

func TestClusterDecisionsAgreeAcrossNodes(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d nodes", size), func(t *testing.T) { testDecisionsAgree(t, size) })
	}
}

func testDecisionsAgree(t *testing.T, size int) {
	tc := newTestCluster(t, size)
	n0 := tc.nodes[0]
	_, err := n0.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "fixed", Policy: bucket.Policy{Capacity: 90, Rate: 0}})
	require.NoError(t, err)
	require.NoError(t, tc.nodes[1].SetClientTier(ctx(t), "hot", "fixed", "ops"))

	// Leaders are spread: with 7 groups over the nodes, every node leads one.
	require.Eventually(t, func() bool {
		for _, n := range tc.nodes {
			leads := 0
			for _, g := range n.allGroups() {
				if g.Serving() {
					leads++
				}
			}
			if leads == 0 {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "leaders never spread over the nodes")

	var mu sync.Mutex
	var remaining []int64
	var wg sync.WaitGroup
	for w := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := tc.nodes[w%size]
			for range 5 {
				ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "hot", Cost: 1}})
				if !assert.NoError(t, err) {
					return
				}
				if ds[0].Allowed {
					mu.Lock()
					remaining = append(remaining, ds[0].RemainingTokens())
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	// A single sequential bucket of 90 at rate 0 admits exactly 90 of 150,
	// leaving each balance 89..0 exactly once.
	slices.Sort(remaining)
	want := make([]int64, 90)
	for i := range want {
		want[i] = int64(i)
	}
	assert.Equal(t, want, remaining)

	for _, n := range tc.nodes {
		v, err := n.Client(ctx(t), "hot")
		require.NoError(t, err)
		assert.Equal(t, "fixed", v.Tier)
		assert.Equal(t, int64(0), v.Decision.Remaining, "every node reads the same balance")
	}
}

func TestClusterFailoverNeverGivesAFreshBucket(t *testing.T) {
	tc := newTestCluster(t, 3)
	_, err := tc.nodes[0].ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "fixed", Policy: bucket.Policy{Capacity: 200, Rate: 0}})
	require.NoError(t, err)
	require.NoError(t, tc.nodes[0].SetClientTier(ctx(t), "hot", "fixed", "ops"))

	victim := tc.leaderOfClient("hot")
	require.GreaterOrEqual(t, victim, 0)
	var admitted atomic.Int64
	var failedMu sync.Mutex
	var failed []string // request ids whose outcome the caller did not learn
	stopLoad := runLoad(t, 8, 100_000, func(w, i int) {
		n := tc.nodes[(victim+1+w%2)%3] // only the survivors take requests
		c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		id := fmt.Sprintf("w%d-%d", w, i)
		ds, err := n.Allow(c, []fsm.AllowRequest{{Client: "hot", Cost: 1, RequestID: id}})
		cancel()
		if err != nil {
			failedMu.Lock()
			failed = append(failed, id)
			failedMu.Unlock()
		} else if ds[0].Allowed && !ds[0].Duplicate {
			admitted.Add(1)
		}
	})
	require.Eventually(t, func() bool { return admitted.Load() >= 50 }, 10*time.Second, time.Millisecond)
	tc.stop(victim) // the leader of hot's group dies mid-load
	require.Eventually(t, func() bool {
		return tc.leaderOfClient("hot") >= 0
	}, 10*time.Second, 10*time.Millisecond, "no new leader")
	require.Eventually(t, func() bool { return admitted.Load() >= 150 }, 10*time.Second, time.Millisecond, "the new leader never served")
	stopLoad()

	// Resolve every unknown outcome by retrying its request id: a request
	// that was applied answers with its original decision.
	survivor := tc.live()[0]
	for _, id := range failed {
		ds, err := survivor.Allow(ctx(t), []fsm.AllowRequest{{Client: "hot", Cost: 1, RequestID: id}})
		require.NoError(t, err)
		if ds[0].Allowed {
			admitted.Add(1)
		}
	}
	t.Logf("admitted %d, %d outcomes resolved by retry", admitted.Load(), len(failed))
	assert.LessOrEqual(t, admitted.Load(), int64(200), "capacity 200 at rate 0: a failover must not refill")
	v, err := survivor.Client(ctx(t), "hot")
	require.NoError(t, err)
	assert.Equal(t, 200-admitted.Load(), v.Decision.RemainingTokens(), "the balance accounts for every admission")
}

func TestClusterRestartKeepsBalances(t *testing.T) {
	tc := newTestCluster(t, 3)
	for i := range 20 {
		_, err := tc.nodes[i%3].Allow(ctx(t), []fsm.AllowRequest{{Client: fmt.Sprintf("c%d", i%5), Cost: 2}})
		require.NoError(t, err)
	}
	for i := range tc.nodes {
		tc.stop(i)
	}
	for i := range tc.nodes {
		tc.start(i)
	}
	tc.waitStable(3)
	for i := range 5 {
		v, err := tc.nodes[(i+1)%3].Client(ctx(t), fmt.Sprintf("c%d", i))
		require.NoError(t, err)
		assert.Equal(t, int64(10-8), v.Decision.RemainingTokens(), "client c%d after a whole-cluster restart", i)
	}
}

func TestClusterPolicyChangeAgreesOnEveryReplica(t *testing.T) {
	tc := newTestCluster(t, 3)
	stopLoad := runLoad(t, 6, 100_000, func(w, i int) {
		tc.clock.(*clock.Manual).Advance(time.Millisecond)
		_, _ = tc.nodes[w%3].Allow(ctx(t), []fsm.AllowRequest{{Client: fmt.Sprintf("k%d", i%17), Cost: 1}})
	})
	for _, c := range []int64{5, 50, 2, 8} {
		cc, err := tc.nodes[1].ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: c, Rate: bucket.Scale}})
		require.NoError(t, err)
		assert.Empty(t, cc.Lagging)
	}
	stopLoad()

	// Every replica of every group applied the same entries: equal state bytes.
	for gi := range tc.groups + 1 {
		require.Eventually(t, func() bool {
			var snaps [][]byte
			var applied []uint64
			for _, n := range tc.nodes {
				g := n.allGroups()[gi]
				snaps = append(snaps, g.FSM.MarshalSnapshot())
				applied = append(applied, g.FSM.AppliedIndex())
			}
			for i := 1; i < len(snaps); i++ {
				if applied[i] != applied[0] || string(snaps[i]) != string(snaps[0]) {
					return false
				}
			}
			return true
		}, 10*time.Second, 20*time.Millisecond, "replicas of group %d disagree", gi)
	}
}

func TestClusterMinorityLeaderCannotAdmit(t *testing.T) {
	tc := newTestCluster(t, 3)
	victim := tc.leaderOfClient("lonely")
	require.GreaterOrEqual(t, victim, 0)
	tc.partition.Isolate(tc.raft[victim])
	defer tc.partition.Heal()

	c, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	ds, err := tc.nodes[victim].Allow(c, []fsm.AllowRequest{{Client: "lonely", Cost: 1}})
	assert.Error(t, err, "an isolated leader must not decide")
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.Empty(t, ds)
	// It answers once it knows it is cut off (its lease lapsed, and it has
	// heard from no other voter for two heartbeat timeouts), not at the
	// caller's deadline; the request may have been appended to its log
	// before it knew, so the answer may be outcome_unknown.
	assert.Less(t, time.Since(start), time.Second, "the isolated leader held the request until the deadline")

	// The majority side elects a new leader and decides; the balance shows
	// no admission from the isolated side.
	other := tc.nodes[(victim+1)%3]
	d, err := other.Allow(ctx(t), []fsm.AllowRequest{{Client: "lonely", Cost: 1}})
	require.NoError(t, err)
	assert.True(t, d[0].Allowed)
	assert.Equal(t, bucket.BuiltinDefault.Capacity-1, d[0].RemainingTokens())
}

func TestClusterJoinAndReplaceDeadNode(t *testing.T) {
	tc := &testCluster{t: t, clock: clock.NewManual(), groups: 6, partition: &Partition{}, deadAfter: 500 * time.Millisecond}
	tc.addNode()
	tc.waitStable(1)
	_, err := tc.nodes[0].Allow(ctx(t), []fsm.AllowRequest{{Client: "early", Cost: 4}})
	require.NoError(t, err)
	for range 4 {
		tc.addNode()
	}
	tc.waitStable(5) // every group now has 3 voters spread over 5 nodes

	victim := tc.leaderOfClient("early")
	tc.stop(victim)
	tc.waitStable(5) // 3 live voters per group again, none of them the victim
	for _, n := range tc.live() {
		v, err := n.Client(ctx(t), "early")
		require.NoError(t, err)
		assert.Equal(t, int64(6), v.Decision.RemainingTokens())
	}
}

// A node whose group count differs from the cluster's would route clients
// to other groups: its join is refused with an error that says what to do.
func TestJoinRefusesAnotherGroupCount(t *testing.T) {
	tc := newTestCluster(t, 1)
	_, err := New(Options{
		NodeID: "odd", DataDir: t.TempDir(), RaftAddr: freeport.Addr(t), GossipAddr: freeport.Addr(t),
		Join: []string{tc.gossip[0]}, Groups: tc.groups + 2, Logger: slog.New(slog.DiscardHandler),
		Raft: LoopbackRaftTimings, ReclaimInterval: -1,
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("--groups %d", tc.groups))
	assert.Empty(t, tc.nodes[0].members.Snapshot(), "the first node never admitted the odd one")
}

// A new node told no group count, joining a cluster of another count than
// the default, takes the cluster's: it becomes a voter and decides.
func TestJoinLearnsTheGroupCount(t *testing.T) {
	tc := newTestCluster(t, 1) // 6 groups, not DefaultGroups
	require.NotEqual(t, raftgroup.DefaultGroups, tc.groups)
	dir := t.TempDir()
	n, err := New(Options{
		NodeID: "n2", DataDir: dir, RaftAddr: freeport.Addr(t), GossipAddr: freeport.Addr(t), HTTPAddr: "127.0.0.102:7070",
		Join: []string{tc.gossip[0]}, Logger: slog.New(slog.DiscardHandler), Clock: tc.clock,
		Raft: LoopbackRaftTimings, ReclaimInterval: -1, PlacementInterval: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	assert.Len(t, n.groups, tc.groups)
	cf, err := readGroupsOf(dir)
	require.NoError(t, err)
	assert.Equal(t, tc.groups, cf, "quorate.json records the cluster's count")
	require.Eventually(t, func() bool { return n.Ready(ctx(t)) == nil }, 20*time.Second, 10*time.Millisecond)
	d, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "joined", Cost: 1}})
	require.NoError(t, err)
	assert.True(t, d[0].Allowed)

	// Told a count, or with a data dir of its own, a node is still refused.
	_, err = New(Options{
		NodeID: "n3", DataDir: t.TempDir(), RaftAddr: freeport.Addr(t), GossipAddr: freeport.Addr(t),
		Join: []string{tc.gossip[0]}, Groups: raftgroup.DefaultGroups, Logger: slog.New(slog.DiscardHandler),
		Raft: LoopbackRaftTimings, ReclaimInterval: -1,
	})
	assert.ErrorContains(t, err, fmt.Sprintf("--groups %d", tc.groups))
}

func readGroupsOf(dir string) (int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "quorate.json"))
	if err != nil {
		return 0, err
	}
	var cf raftgroup.ClusterFile
	err = json.Unmarshal(data, &cf)
	return cf.Groups, err
}

// A node stopped gracefully (Close, what SIGTERM does) hands the groups it
// leads to other voters before its raft stops, so that none of them goes
// without a serving leader for more than a round trip and an election. The
// timeouts here are long (1 s): without a hand-over, a group would go at
// least 0.6 s without a leader (a follower stands only after 1 s without
// hearing from its leader, whose last heartbeat left at most a tick, a
// third of that, before it stopped). 200 ms is also less than a tick: the
// new leader must not wait for raftnet's tick before its barrier commits
// (see raftgroup's transport).
// newSlowTestCluster is a stable 3-node, 3-group cluster with raft
// timeouts of a second, so that no election happens by chance during a
// test that watches leadership move by hand-over.
func newSlowTestCluster(t *testing.T) *testCluster {
	slow := LoopbackRaftTimings
	slow.HeartbeatTimeout, slow.ElectionTimeout, slow.LeaderLeaseTimeout = time.Second, time.Second, time.Second
	tc := &testCluster{t: t, clock: clock.NewManual(), groups: 3, partition: &Partition{}, deadAfter: time.Hour, timings: &slow}
	for range 3 {
		tc.addNode()
	}
	tc.waitStable(3)
	return tc
}

func TestClusterGracefulStopHandsLeadershipOver(t *testing.T) {
	tc := newSlowTestCluster(t)

	victim := tc.leaderOfClient("anyone")
	require.GreaterOrEqual(t, victim, 0)
	var led []int // indexes in allGroups of the groups the victim leads
	for gi, g := range tc.nodes[victim].allGroups() {
		if g.Serving() {
			led = append(led, gi)
		}
	}
	require.NotEmpty(t, led)
	// Watch, every millisecond from the stop on, how long each of those
	// groups goes without any node serving it.
	servedBy := func(gi int) bool {
		for _, n := range tc.nodes {
			if n.allGroups()[gi].Serving() {
				return true
			}
		}
		return false
	}
	closed := make(chan error, 1)
	go func() { closed <- tc.nodes[victim].Close() }()
	unserved := map[int]time.Time{} // group → since when no node serves it
	var worst time.Duration
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(time.Millisecond) // raft runs on real time: this only looks
	defer poll.Stop()
	for stopped := false; ; <-poll.C {
		select {
		case err := <-closed:
			require.NoError(t, err)
			stopped = true
		default:
		}
		allServed := true
		for _, gi := range led {
			if servedBy(gi) {
				if since, ok := unserved[gi]; ok {
					worst = max(worst, time.Since(since))
					delete(unserved, gi)
				}
				continue
			}
			allServed = false
			if _, ok := unserved[gi]; !ok {
				unserved[gi] = time.Now()
			}
		}
		if stopped && allServed {
			break
		}
		require.True(t, time.Now().Before(deadline), "the stopped node's groups were never served again")
	}
	tc.nodes[victim] = nil
	t.Logf("the %d groups the stopped node led were without a serving leader for at most %v", len(led), worst)
	assert.Less(t, worst, 200*time.Millisecond, "a group went without a leader for longer than 200 ms")

	// And they decide: a client of a handed-over group is served by the survivors.
	_, err := tc.live()[0].Allow(ctx(t), []fsm.AllowRequest{{Client: "anyone", Cost: 1}})
	require.NoError(t, err)
}

// A node cut off from the rest answers at once that it cannot decide
// (503 unavailable: nothing was decided) rather than hold every request
// until the caller's deadline, so that callers move to another node; nodes
// that still reach a majority keep holding requests through the failover of
// the isolated node's groups, and decide them once a new leader serves.
func TestClusterIsolatedNodeRefusesAtOnce(t *testing.T) {
	tc := newTestCluster(t, 3)
	// The victim leads some groups and follows in others: requests for both
	// kinds reach it.
	victim := tc.leaderOfClient("lonely")
	require.GreaterOrEqual(t, victim, 0)
	var mine, theirs string // clients of a group the victim leads, and of one it does not
	for i := 0; mine == "" || theirs == ""; i++ {
		c := fmt.Sprintf("c%d", i)
		if tc.leaderOfClient(c) == victim {
			mine = cmp.Or(mine, c)
		} else {
			theirs = cmp.Or(theirs, c)
		}
	}
	tc.partition.Isolate(tc.raft[victim])
	defer tc.partition.Heal()

	// The survivors hold requests for the victim's group through its
	// failover, and decide them.
	survivor := tc.nodes[(victim+1)%3]
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := survivor.Allow(c, []fsm.AllowRequest{{Client: mine, Cost: 1, RequestID: "s1"}})
	require.NoError(t, err, "a node that reaches a majority must hold the request until a new leader decides it")
	assert.True(t, ds[0].Allowed)

	// The victim, once it has heard from nobody for two heartbeat
	// timeouts, refuses at once, whichever group is asked for: every
	// attempt within a 5 s deadline is answered "unavailable" in well under
	// a second, and none of them decides anything.
	for i, client := range []string{theirs, mine, theirs, mine} {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		_, err := tc.nodes[victim].Allow(c, []fsm.AllowRequest{{Client: client, Cost: 1, RequestID: fmt.Sprintf("v%d", i)}})
		cancel()
		took := time.Since(start)
		require.ErrorIs(t, err, ErrUnavailable, "attempt %d", i)
		if i > 0 { // the first may have been appended while the victim still led, or forwarded
			assert.NotErrorIs(t, err, ErrOutcomeUnknown, "attempt %d: nothing was proposed", i)
		}
		assert.Less(t, took, time.Second, "attempt %d (client %s) was held %v", i, client, took)
	}
	for _, client := range []string{theirs, mine} {
		v, err := survivor.Client(ctx(t), client)
		require.NoError(t, err)
		want := bucket.BuiltinDefault.Capacity
		if client == mine {
			want-- // the survivor's admission
		}
		assert.Equal(t, want, v.Decision.RemainingTokens(), "the isolated node decided nothing for %s", client)
	}
}
