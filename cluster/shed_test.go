package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/quorate/quorate/cluster/clock"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/fsm"
)

// A group that remembers the most request ids it may sheds a request with
// a new id: the call is refused retry_safe (nothing decided), a call of
// which part was decided is unknown, and requests without ids and retries
// of remembered ids are decided as always.
func TestANewRequestIDPastTheGroupsMemoryIsRefused(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual(), func(o *Options) { o.requestIDMax = 2 })
	require.Eventually(t, func() bool {
		for _, g := range n.allGroups() {
			if g.FSM.ClusterVersion() < fsm.ClusterVersionIDMemory {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "every group reaches cluster version %d", fsm.ClusterVersionIDMemory)
	allow := func(reqs ...fsm.AllowRequest) ([]fsm.Decision, error) {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return n.Allow(c, reqs)
	}
	req := func(id string) fsm.AllowRequest { return fsm.AllowRequest{Client: "a", Cost: 1, RequestID: id} }

	for _, id := range []string{"r1", "r2"} {
		ds, err := allow(req(id))
		require.NoError(t, err, id)
		require.True(t, ds[0].Allowed, id)
	}
	g := n.groupFor("a").FSM
	now := n.opts.Clock.Now().UnixNano()
	before := g.View("a", now)
	_, err := allow(req("r3"))
	require.ErrorIs(t, err, ErrRequestIDsFull)
	e, ok := errs.Classify(err)
	require.True(t, ok)
	assert.Equal(t, api.CodeRequestIDsFull, e.Code())
	assert.Equal(t, api.RetrySafe, e.Kind(), "nothing was decided: safe to send again anywhere")
	assert.Equal(t, before, g.View("a", now), "nothing was taken")
	byID, _ := g.Remembered()
	assert.Equal(t, 2, byID, "nor remembered")

	ds, err := allow(req("r1"))
	require.NoError(t, err)
	assert.True(t, ds[0].Duplicate, "a remembered id is answered")
	ds, err = allow(fsm.AllowRequest{Client: "a", Cost: 1})
	require.NoError(t, err)
	assert.True(t, ds[0].Allowed, "a request without an id is decided")
	assert.Less(t, g.View("a", now).Decision.Remaining, before.Decision.Remaining, "and took its token")

	_, err = allow(req("r1"), req("r4"))
	require.ErrorIs(t, err, ErrOutcomeUnknown, "part of the call was answered: the caller learns it by sending it again")
	assert.ErrorIs(t, err, ErrRequestIDsFull)
	e, _ = errs.Classify(err)
	assert.Equal(t, api.CodeOutcomeUnknown, e.Code())
}
