package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// In a rolling restart the node stopped just before may still be the most
// up-to-date voter of a group the next one leads, and raft's own pick for
// the hand-over is then a voter that is not running: the hand-over failed
// and the group went a heartbeat timeout or more without a leader. The
// leader now hands over to a voter it has heard from instead.
func TestHandOverSkipsAStoppedVoter(t *testing.T) {
	// Had the hand-over failed, the leader would keep leading: its running
	// follower hears it and never stands.
	tc := newSlowTestCluster(t)

	l := tc.leaderOfClient("anyone")
	require.GreaterOrEqual(t, l, 0)
	stopped, live := (l+1)%3, (l+2)%3
	tc.stop(stopped)
	leader := tc.nodes[l]
	g := leader.groupFor("anyone")
	require.True(t, g.Serving(), "the leader keeps its group with one follower left")

	require.NoError(t, g.HandOverElsewhere(leader.reach.LiveVoters, errors.New("raft picked the stopped voter"), leader.logger))
	require.Eventually(t, func() bool { return tc.nodes[live].groupFor("anyone").Serving() }, 5*time.Second, time.Millisecond,
		"the running voter leads, within the hand-over and well before any election")
	assert.False(t, g.Serving())
}
