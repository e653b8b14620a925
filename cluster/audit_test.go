package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
)

// Who made a change travels with it to the leader that proposes it, and
// the trail is read through the meta leader from any node: a change asked
// of one follower and read from another names its actor and the meta
// leader's time, and a client's record names whoever assigned it, asked
// of a node that does not lead its group.
func TestAuditThroughAnyNode(t *testing.T) {
	tc := newTestCluster(t, 3)
	require.Eventually(t, func() bool { return tc.nodes[0].ClusterVersion() >= fsm.ClusterVersionAudit }, 20*time.Second, 10*time.Millisecond)
	var followers []*Node
	for _, n := range tc.nodes {
		if self, _ := n.router.LeaderOf(n.meta); !self {
			followers = append(followers, n)
		}
	}
	require.Len(t, followers, 2)
	before := tc.clock.Now().UnixNano()
	op := fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: bucket.Policy{Capacity: 10, Rate: bucket.Scale}, Audited: fsm.Audited{Actor: "ops"}}
	cc, err := followers[0].ChangeConfig(ctx(t), op)
	require.NoError(t, err)
	_, err = followers[0].ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "pro"})
	require.NoError(t, err)

	page, err := followers[1].Audit(ctx(t), cc.Version-1, 10)
	require.NoError(t, err)
	require.Len(t, page.Entries, 2)
	e := page.Entries[0]
	assert.Equal(t, cc.Version, e.Version)
	assert.Equal(t, "ops", e.By)
	assert.Equal(t, fsm.OpSetTier, e.Kind)
	assert.Nil(t, e.Before, "the tier was created")
	assert.Equal(t, &op.Policy, e.After)
	assert.GreaterOrEqual(t, e.At, before, "stamped by the meta leader's clock")
	assert.Equal(t, fsm.Anonymous, page.Entries[1].By, "a change without an actor is anonymous's")
	assert.Equal(t, &op.Policy, page.Entries[1].Before)
	assert.Nil(t, page.Entries[1].After, "the tier was deleted")

	client := "carol"
	var far *Node
	for i, n := range tc.nodes {
		if i != tc.leaderOfClient(client) {
			far = n
		}
	}
	require.NoError(t, far.SetClientTier(ctx(t), client, "gold", "deploy-bot"))
	_, err = far.ResetClient(ctx(t), client, "ops")
	require.NoError(t, err)
	v, err := far.Client(ctx(t), client)
	require.NoError(t, err)
	assert.Equal(t, "deploy-bot", v.Record.Assigned.By)
	assert.Equal(t, "gold", v.Record.AssignedTier)
	assert.Equal(t, "ops", v.Record.Reset.By)
	assert.GreaterOrEqual(t, v.Record.Reset.At, before)
	for _, n := range tc.nodes { // every replica holds the record
		require.Eventually(t, func() bool { r, ok := n.groupFor(client).FSM.Record(client); return ok && r == v.Record }, 10*time.Second, 5*time.Millisecond)
	}
}

// At cluster version 1 a change is written as the release before reads
// it, with no actor or time, and the trail is refused rather than shown
// empty: it records nothing until version 2.
func TestAuditNeedsClusterVersion2(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual(), func(o *Options) { o.maxClusterVersion = fsm.BaseClusterVersion })
	require.Eventually(t, func() bool { return n.ClusterVersion() == fsm.BaseClusterVersion && n.meta.FSM.ConfigVersion() > 0 }, 10*time.Second, 5*time.Millisecond)
	_, err := n.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: bucket.Policy{Capacity: 10}, Audited: fsm.Audited{Actor: "ops"}})
	require.NoError(t, err)
	require.NoError(t, n.SetClientTier(ctx(t), "p", "pro", "ops"))
	types := map[fsm.Type]int{}
	for _, g := range []*raftgroup.Group{n.meta, n.groupFor("p")} {
		first, err := g.Store.FirstIndex()
		require.NoError(t, err)
		last, err := g.Store.LastIndex()
		require.NoError(t, err)
		for i := first; i <= last; i++ {
			var l raft.Log
			require.NoError(t, g.Store.GetLog(i, &l))
			if l.Type == raft.LogCommand {
				c, err := fsm.Decode(l.Data)
				require.NoError(t, err)
				types[c.Type()]++
			}
		}
	}
	assert.Positive(t, types[fsm.TypeConfigOp], "the change is in the log, as v0.14.0 writes it: %v", types)
	assert.Positive(t, types[fsm.TypeSetTier], "the assignment too: %v", types)
	assert.Zero(t, types[fsm.TypeConfigOpV2]+types[fsm.TypeSetTierV2], "nothing a replica of v0.14.0 cannot read: %v", types)
	_, err = n.Audit(ctx(t), 0, 10)
	assert.ErrorIs(t, err, ErrClusterVersion)
}
