package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
)

// clusterVersions returns every group's cluster version on every live node.
func (tc *testCluster) clusterVersions() map[uint32]int {
	out := map[uint32]int{}
	for _, n := range tc.live() {
		for _, g := range n.allGroups() {
			out[g.FSM.ClusterVersion()]++
		}
	}
	return out
}

// The cluster version moves up only once every member runs it: while one
// node claims only the base version (as a node of the release before
// does: here the one that created the cluster), every group stays there;
// once it restarts with this binary, every group of every replica moves,
// and GET /v1/cluster says so.
func TestClusterVersionMovesUpAfterTheLastNode(t *testing.T) {
	tc := &testCluster{t: t, clock: clock.NewManual(), groups: 3, partition: &Partition{}, deadAfter: time.Hour,
		maxCV: map[int]uint32{0: fsm.BaseClusterVersion}}
	for range 3 {
		tc.addNode()
	}
	tc.waitStable(3)
	for range 3 {
		for _, n := range tc.live() {
			n.versions.Raise()
		}
	}
	assert.Equal(t, map[uint32]int{fsm.BaseClusterVersion: 3 * (tc.groups + 1)}, tc.clusterVersions(), "n3 runs only the base version")
	st, err := tc.nodes[0].Status(ctx(t))
	require.NoError(t, err)
	assert.Equal(t, fsm.BaseClusterVersion, st.ClusterVersion)
	byID := map[string]api.NodeStatus{}
	for _, ns := range st.Nodes {
		byID[ns.ID] = ns
	}
	assert.Equal(t, fsm.BaseClusterVersion, byID["n1"].MaxClusterVersion)
	assert.Equal(t, fsm.MaxClusterVersion, byID["n3"].MaxClusterVersion)
	assert.NotEmpty(t, byID["n2"].Version)

	// Decisions meanwhile use the base rules and formats.
	require.True(t, allowOne(t, tc.nodes[0], "a", 1).Allowed)

	tc.stop(0)
	delete(tc.maxCV, 0)
	tc.start(0)
	tc.waitStable(3)
	require.Eventually(t, func() bool {
		return tc.clusterVersions()[fsm.MaxClusterVersion] == 3*(tc.groups+1)
	}, 20*time.Second, 10*time.Millisecond, "every group of every replica moves to version %d: %v", fsm.MaxClusterVersion, tc.clusterVersions())
	for _, n := range tc.live() {
		st, err := n.Status(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, fsm.MaxClusterVersion, st.ClusterVersion, "%s", n.opts.NodeID)
	}
	d := allowOne(t, tc.nodes[1], "a", 1)
	assert.True(t, d.Allowed)
}

// A node whose binary cannot run a group's cluster version is never added
// to the group: applying its log would stop it.
func TestPlacementAddsNoVoterThatCannotRunTheClusterVersion(t *testing.T) {
	tc := newTestCluster(t, 1)
	require.Eventually(t, func() bool {
		return tc.clusterVersions()[fsm.MaxClusterVersion] == tc.groups+1
	}, 10*time.Second, 10*time.Millisecond, "a one-node cluster runs the newest version")

	tc.maxCV = map[int]uint32{1: fsm.BaseClusterVersion}
	old := tc.addNode()
	require.Eventually(t, func() bool { return tc.nodes[0].members.Snapshot()["n2"].Meta.RaftAddr != "" }, 10*time.Second, 10*time.Millisecond)
	before := tc.nodes[0].placer.Rounds()
	require.Eventually(t, func() bool { return tc.nodes[0].placer.Rounds() >= before+5 }, 10*time.Second, 10*time.Millisecond)
	for _, g := range tc.nodes[0].allGroups() {
		assert.Equal(t, []string{"n1"}, raftgroup.VoterIDs(g.Raft.GetConfiguration().Configuration()), "group %s", g.ID)
	}
	assert.Zero(t, old.groups[0].FSM.AppliedIndex(), "n2 never received a log")
}

// From cluster version 2, every process gets an origin epoch of its own
// from the meta group: two processes never share one (24 random bits
// could), so a retry can never be answered with another process's
// decision. A restarted node gets a new one.
func TestEveryProcessGetsItsOwnOriginEpoch(t *testing.T) {
	tc := newTestCluster(t, 3)
	epochs := func() []uint32 {
		var out []uint32
		for _, n := range tc.live() {
			e, ok := n.origins.Current()
			if !ok {
				return nil
			}
			out = append(out, e)
		}
		return out
	}
	require.Eventually(t, func() bool { return len(epochs()) == 3 }, 20*time.Second, 10*time.Millisecond, "every node was given an epoch")
	seen := map[uint32]bool{}
	for _, e := range epochs() {
		assert.Less(t, e, uint32(fsm.RandomEpochBase), "an allocated epoch")
		assert.False(t, seen[e], "epoch %d given twice", e)
		seen[e] = true
	}
	tc.stop(1)
	tc.start(1)
	require.Eventually(t, func() bool { _, ok := tc.nodes[1].origins.Current(); return ok }, 20*time.Second, 10*time.Millisecond)
	e, _ := tc.nodes[1].origins.Current()
	assert.False(t, seen[e], "the restarted process got a new epoch, not %d again", e)
	d := allowOne(t, tc.nodes[1], "a", 1)
	assert.Equal(t, e, uint32(d.Origin>>40), "its decisions carry it")
}

// A leader answers forwarded decisions with their policy's rate only from
// cluster version 2 on; before, in exactly the layout a node of the
// release before reads, so no decision it forwards knows its rate. Its own
// callers' decisions know it either way.
func TestForwardedDecisionsCarryTheirRateFromClusterVersion2(t *testing.T) {
	for _, c := range []struct {
		version uint32
		known   bool
	}{{fsm.BaseClusterVersion, false}, {fsm.ClusterVersionOriginsAlways, true}} {
		n := startNode(t, t.TempDir(), clock.NewManual(), func(o *Options) { o.maxClusterVersion = c.version })
		require.Eventually(t, func() bool { return n.ClusterVersion() == c.version }, 10*time.Second, 5*time.Millisecond)
		setTier(t, n, "pro", 10, 3)
		require.NoError(t, n.SetClientTier(ctx(t), "p", "pro", "ops"))

		req := peerrpc.AllowReq{Items: []peerrpc.AllowItem{
			{Group: GroupOf("p", len(n.groups)), Requests: []fsm.AllowRequest{{Client: "p", Cost: 1}}},
		}}
		data, err := n.forward(ctx(t), n.RaftAddr(), peerrpc.AppendAllowReq(nil, req))
		require.NoError(t, err)
		resp, err := peerrpc.DecodeAllowResp(data)
		require.NoError(t, err)
		require.Len(t, resp.Items, 1)
		require.Nil(t, resp.Items[0].Error)
		require.Len(t, resp.Items[0].Decisions, 1)
		d := resp.Items[0].Decisions[0]
		assert.Equal(t, c.known, d.RateKnown, "cluster version %d", c.version)
		if c.known {
			assert.Equal(t, int64(3*bucket.Scale), d.Rate)
		} else {
			assert.Equal(t, peerrpc.AppendAllowResp(nil, resp, false), data, "the released layout")
		}

		local := allowOne(t, n, "p", 1)
		assert.True(t, local.RateKnown, "cluster version %d: decided here", c.version)
		assert.Equal(t, int64(3*bucket.Scale), local.Rate)
	}
}

// A reset is a new entry type: at cluster version 1 (a replica of the
// release before may hold the group) it is refused, appending nothing;
// from version 2 it forgets the bucket, through the leader of the client's
// group, on every replica.
func TestResetClientNeedsClusterVersion2(t *testing.T) {
	for _, version := range []uint32{fsm.BaseClusterVersion, fsm.ClusterVersionOriginsAlways} {
		n := startNode(t, t.TempDir(), clock.NewManual(), func(o *Options) { o.maxClusterVersion = version })
		require.Eventually(t, func() bool { return n.ClusterVersion() == version }, 10*time.Second, 5*time.Millisecond)
		setTier(t, n, "pro", 10, 0)
		require.NoError(t, n.SetClientTier(ctx(t), "r", "pro", "ops"))
		require.True(t, allowOne(t, n, "r", 10).Allowed)
		g := n.groupFor("r")
		applied := g.Raft.AppliedIndex()

		had, err := n.ResetClient(ctx(t), "r", "ops")
		if version < fsm.ClusterVersionOriginsAlways {
			require.ErrorIs(t, err, ErrClusterVersion)
			assert.Equal(t, applied, g.Raft.AppliedIndex(), "nothing appended")
			assert.False(t, allowOne(t, n, "r", 1).Allowed, "still drained")
			continue
		}
		require.NoError(t, err)
		assert.True(t, had)
		d := allowOne(t, n, "r", 10)
		assert.True(t, d.Allowed, "full again after the reset")
		assert.Equal(t, "pro", d.Tier, "the tier assignment stays")
	}
}

// The policies of cluster version 2 and fills are new entry types: at
// version 1 a change using them is refused, appending nothing, while a
// plain token bucket is still taken; from version 2 both are.
func TestNewPoliciesNeedClusterVersion2(t *testing.T) {
	window := bucket.Policy{Algorithm: bucket.SlidingWindow, Capacity: 5, Window: 60 * bucket.Second}
	fill := fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: bucket.Policy{Capacity: 20}, OnRaise: bucket.Fill}
	for _, version := range []uint32{fsm.BaseClusterVersion, fsm.ClusterVersionPolicies} {
		n := startNode(t, t.TempDir(), clock.NewManual(), func(o *Options) { o.maxClusterVersion = version })
		require.Eventually(t, func() bool { return n.ClusterVersion() == version }, 10*time.Second, 5*time.Millisecond)
		setTier(t, n, "pro", 10, 0)
		applied := n.meta.Raft.AppliedIndex()
		_, errWindow := n.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "w", Policy: window})
		_, errFill := n.ChangeConfig(ctx(t), fill)
		if version < fsm.ClusterVersionPolicies {
			assert.ErrorIs(t, errWindow, ErrClusterVersion)
			assert.ErrorIs(t, errFill, ErrClusterVersion)
			assert.Equal(t, applied, n.meta.Raft.AppliedIndex(), "nothing appended")
			continue
		}
		require.NoError(t, errWindow)
		require.NoError(t, errFill)
		d := allowOne(t, n, "w-client", 1)
		assert.True(t, d.Allowed)
		cfg := n.meta.FSM.Config()
		assert.Equal(t, window, cfg.Tiers["w"])
		assert.Equal(t, cfg.Version, cfg.Filled["pro"], "the raise was recorded as a fill")
		require.Eventually(t, func() bool {
			for _, g := range n.groups {
				if !g.FSM.Config().Equal(cfg) {
					return false
				}
			}
			return true
		}, 10*time.Second, 5*time.Millisecond, "every data group installs the configuration, fills included")
	}
}
