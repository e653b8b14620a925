package cluster

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/datadir"
	"github.com/quorate/quorate/fsm"
)

// Two of three nodes are lost for good: the survivor alone can never elect
// a leader. Recover makes it the only voter of every group, and it serves
// again with every balance it held.
func TestRecoverFromLostMajority(t *testing.T) {
	tc := newTestCluster(t, 3)
	_, err := tc.nodes[0].ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "fixed", Policy: bucket.Policy{Capacity: 50, Rate: 0}})
	require.NoError(t, err)
	clients := []string{"a", "b", "c", "d", "e", "f"}
	for i, c := range clients {
		require.NoError(t, tc.nodes[0].SetClientTier(ctx(t), c, "fixed", "ops"))
		_, err := tc.nodes[0].Allow(ctx(t), []fsm.AllowRequest{{Client: c, Cost: int64(i + 1)}})
		require.NoError(t, err)
	}
	// n3's replicas hold every decision before the majority is lost.
	require.Eventually(t, func() bool {
		for i, c := range clients {
			v := tc.nodes[2].groupFor(c).FSM.View(c, 0)
			if !v.Known || v.Decision.RemainingTokens() != int64(50-(i+1)) {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	for i := range 3 {
		tc.stop(i)
	}

	voters := []datadir.Voter{{ID: "n3", RaftAddr: tc.raft[2]}}
	_, err = datadir.Recover(tc.dirs[0], voters, slog.New(slog.DiscardHandler), nil)
	assert.Error(t, err, "a data dir whose node is not among the voters is refused")
	var started []string
	groups, err := datadir.Recover(tc.dirs[2], voters, slog.New(slog.DiscardHandler), func(g datadir.RecoveredGroup) { started = append(started, g.ID) })
	require.NoError(t, err)
	require.Len(t, groups, tc.groups+1)
	for i, g := range groups {
		assert.False(t, g.Skipped, "n3 held a replica of group %s", g.ID)
		assert.Positive(t, g.LastIndex)
		assert.Equal(t, g.ID, started[i], "told as each group began")
	}
	assert.Len(t, started, len(groups))

	tc.start(2)
	n := tc.nodes[2]
	require.Eventually(t, func() bool { return n.Ready(context.Background()) == nil }, 20*time.Second, 20*time.Millisecond,
		"the survivor never served after recovery")
	for i, c := range clients {
		v, err := n.Client(ctx(t), c)
		require.NoError(t, err)
		assert.Equal(t, "fixed", v.Tier)
		assert.Equal(t, int64(50-(i+1)), v.Decision.RemainingTokens(), "client %s", c)
	}
	ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "a", Cost: 1}})
	require.NoError(t, err)
	assert.Equal(t, int64(48), ds[0].RemainingTokens())
}
