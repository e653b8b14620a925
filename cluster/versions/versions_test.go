package versions

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/raftgroup/raftgrouptest"
	"github.com/quorate/quorate/fsm"
)

// gate is node n1's gate over a meta and a data group it alone votes in,
// with members as gossip's view (n1 itself need not be in it).
func gate(t *testing.T, members map[string]membership.Member) (*Gate, *raftgroup.Group, *raftgroup.Group) {
	meta, data := raftgrouptest.Single(t, "meta", 0), raftgrouptest.Single(t, "0", 0)
	return &Gate{
		Self:       "n1",
		Max:        fsm.MaxClusterVersion,
		Groups:     func() (*raftgroup.Group, []*raftgroup.Group) { return meta, []*raftgroup.Group{data} },
		Members:    func() map[string]membership.Member { return members },
		MetaLeader: func() (bool, string) { return true, "" },
		AskMeta: func(context.Context, string) (uint32, error) {
			t.Error("a node with a meta replica asked another for the version")
			return 0, nil
		},
		Logger: slog.New(slog.DiscardHandler),
	}, meta, data
}

func member(maxVersion uint32, state membership.State) membership.Member {
	return membership.Member{State: state, Meta: membership.Meta{MaxClusterVersion: maxVersion}}
}

func TestSupportedIsWhatTheLeastMemberRuns(t *testing.T) {
	members := map[string]membership.Member{
		"n2": member(fsm.MaxClusterVersion, membership.Alive),
		"n3": member(fsm.BaseClusterVersion, membership.Alive),
	}
	v, _, data := gate(t, members)
	cv, by := v.Supported()
	assert.Equal(t, fsm.BaseClusterVersion, cv)
	assert.Equal(t, "n3", by, "the member that holds it back")

	members["n3"] = member(fsm.BaseClusterVersion, membership.Left)
	cv, by = v.Supported()
	assert.Equal(t, fsm.MaxClusterVersion, cv, "a member that left holds nothing back")
	assert.Empty(t, by)

	// A member gossip never described (a release before gossip carried the
	// field) runs only the base version.
	members["n3"] = member(0, membership.Dead)
	cv, by = v.Supported()
	assert.Equal(t, fsm.BaseClusterVersion, cv)
	assert.Equal(t, "n3", by)

	// So does a server of a raft configuration that gossip does not know.
	delete(members, "n3")
	require.NoError(t, data.Raft.AddNonvoter("n9", "n9-addr", 0, 5*time.Second).Error())
	cv, by = v.Supported()
	assert.Equal(t, fsm.BaseClusterVersion, cv)
	assert.Equal(t, "n9", by)
}

func TestRaiseMovesMetaThenEveryDataGroupItLeads(t *testing.T) {
	if fsm.MaxClusterVersion < fsm.BaseClusterVersion+2 {
		t.Fatalf("this test needs two versions above the base; MaxClusterVersion is %d", fsm.MaxClusterVersion)
	}
	members := map[string]membership.Member{"n2": member(fsm.MaxClusterVersion-1, membership.Alive)}
	v, meta, data := gate(t, members)
	require.Equal(t, fsm.BaseClusterVersion, v.Current())

	v.Raise()
	assert.Equal(t, fsm.MaxClusterVersion-1, meta.FSM.ClusterVersion(), "meta moves to what every member runs")
	assert.Equal(t, fsm.MaxClusterVersion-1, data.FSM.ClusterVersion(), "and the data group to meta's")
	assert.Equal(t, fsm.MaxClusterVersion-1, v.Current())

	v.Raise()
	assert.Equal(t, fsm.MaxClusterVersion-1, meta.FSM.ClusterVersion(), "held back while n2 runs less")

	members["n2"] = member(fsm.MaxClusterVersion, membership.Alive)
	v.Raise()
	assert.Equal(t, fsm.MaxClusterVersion, meta.FSM.ClusterVersion())
	assert.Equal(t, fsm.MaxClusterVersion, data.FSM.ClusterVersion())
	assert.Equal(t, fsm.MaxClusterVersion, v.Committed())
}

func TestVotersRunAskEveryOtherVotersGossip(t *testing.T) {
	members := map[string]membership.Member{}
	v, _, data := gate(t, members)
	assert.True(t, v.VotersRun(data, fsm.MaxClusterVersion), "n1 alone, and its binary runs it")
	assert.False(t, v.VotersRun(data, fsm.MaxClusterVersion+1), "no binary here runs a version above its own")

	// A second voter that gossip does not describe holds the group back
	// until it says what it runs. (The group cannot commit without it, so
	// the change is not waited for: raft uses a configuration once logged.)
	_ = data.Raft.AddVoter("n9", "n9-addr", 0, 0)
	require.Eventually(t, func() bool { return len(raftgroup.VoterIDs(data.Raft.GetConfiguration().Configuration())) == 2 },
		5*time.Second, time.Millisecond)
	assert.False(t, v.VotersRun(data, fsm.BaseClusterVersion+1), "n9 is unknown")
	members["n9"] = member(fsm.BaseClusterVersion, membership.Alive)
	assert.False(t, v.VotersRun(data, fsm.BaseClusterVersion+1), "n9 runs only the base")
	members["n9"] = member(fsm.MaxClusterVersion, membership.Alive)
	assert.True(t, v.VotersRun(data, fsm.MaxClusterVersion))

	assert.True(t, MemberRuns(member(0, membership.Alive), fsm.BaseClusterVersion), "every binary runs the base")
	assert.False(t, MemberRuns(member(0, membership.Alive), fsm.BaseClusterVersion+1))
	assert.True(t, MemberRuns(member(fsm.MaxClusterVersion, membership.Alive), fsm.MaxClusterVersion))
}
