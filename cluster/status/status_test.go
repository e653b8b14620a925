package status

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/raftgroup/raftgrouptest"
	"github.com/quorate/quorate/fsm"
)

func TestClusterIsSelfThenMembersThenEveryGroup(t *testing.T) {
	meta := raftgrouptest.Single(t, "meta", 0)
	data := raftgrouptest.Waiting(t, "0", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := meta.ApplyLocal(ctx, fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: bucket.Policy{Capacity: 5, Rate: 1e9}})
	require.NoError(t, err)

	members := map[string]membership.Member{
		"n3": {State: membership.Alive, Meta: membership.Meta{RaftAddr: "10.0.0.3:7071", Leaving: true, MaxClusterVersion: 3}},
		"n2": {State: membership.Dead, Meta: membership.Meta{RaftAddr: "10.0.0.2:7071", HTTPAddr: "10.0.0.2:7070", Version: "v0.13.0"}},
	}
	self := api.NodeStatus{ID: "n1", State: "alive"}
	leaderAt := "10.0.0.2:7071" // where the node's router would send group 0
	leaderOf := func(g *raftgroup.Group) (bool, string) {
		if g == data {
			return false, leaderAt
		}
		return true, ""
	}
	st := Cluster(self, 2, func() map[string]membership.Member { return members }, []*raftgroup.Group{meta, data}, leaderOf)

	assert.Equal(t, "n1", st.NodeID)
	assert.Equal(t, uint32(2), st.ClusterVersion)
	require.Len(t, st.Nodes, 3)
	assert.Equal(t, self, st.Nodes[0], "self first")
	assert.Equal(t, api.NodeStatus{ID: "n2", RaftAddr: "10.0.0.2:7071", HTTPAddr: "10.0.0.2:7070", State: "dead",
		Version: "v0.13.0", MaxClusterVersion: fsm.BaseClusterVersion}, st.Nodes[1], "then by id; a release without the field runs the base")
	assert.Equal(t, "leaving", st.Nodes[2].State, "alive, but said it is leaving")
	assert.Equal(t, uint32(3), st.Nodes[2].MaxClusterVersion)

	require.Len(t, st.Groups, 2)
	m := st.Groups[0]
	assert.Equal(t, "meta", m.ID)
	assert.Equal(t, "Leader", m.State)
	assert.Equal(t, "n1", m.Leader)
	assert.Equal(t, []string{"n1"}, m.Voters)
	assert.Positive(t, m.Term)
	assert.Positive(t, m.AppliedIndex)
	assert.GreaterOrEqual(t, m.CommitIndex, m.AppliedIndex)
	assert.Equal(t, uint64(1), m.ConfigVersion, "the tier change")
	assert.True(t, m.LastContact.IsZero(), "a leader reports no contact time")

	d := st.Groups[1]
	assert.Equal(t, "0", d.ID)
	assert.Equal(t, "Follower", d.State)
	assert.Equal(t, "n2", d.Leader, "a replica that knows no leader names the router's, by member id")
	assert.Empty(t, d.Voters)

	leaderAt = "10.0.0.9:7071"
	st = Cluster(self, 2, func() map[string]membership.Member { return members }, []*raftgroup.Group{meta, data}, leaderOf)
	assert.Equal(t, "10.0.0.9:7071", st.Groups[1].Leader, "or by address when no member is there")
}
