package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/fsm"
)

// A leader's clock jumping minutes ahead neither refills buckets nor makes
// the group forget request ids; before the guard it did both, for good.
func TestClockJumpRefillsNothingAndForgetsNoID(t *testing.T) {
	clk := clock.NewStepping()
	n := startNode(t, t.TempDir(), clk)
	_, err := n.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: 10, Rate: bucket.Scale / 10}})
	require.NoError(t, err)
	ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "a", Cost: 10, RequestID: "x"}})
	require.NoError(t, err)
	require.True(t, ds[0].Allowed)

	clk.Step(10 * time.Minute) // 600 s at 0.1 token/s would refill all 10 tokens
	clk.Advance(time.Second)
	ds, err = n.Allow(ctx(t), []fsm.AllowRequest{{Client: "a", Cost: 1}})
	require.NoError(t, err)
	assert.False(t, ds[0].Allowed, "at most 2 s of refill (0.2 tokens) may be credited, got a token")
	ds, err = n.Allow(ctx(t), []fsm.AllowRequest{{Client: "a", Cost: 10, RequestID: "x"}})
	require.NoError(t, err)
	assert.True(t, ds[0].Duplicate, "the request id is still remembered")
}
