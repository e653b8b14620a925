package cluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// steppingClock has a wall clock that can step on its own and a monotonic
// clock that only advances, like a real host's.
type steppingClock struct {
	wall, mono atomic.Int64
}

func newSteppingClock() *steppingClock {
	c := &steppingClock{}
	c.wall.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *steppingClock) Now() time.Time { return time.Unix(0, c.wall.Load()) }

// Since measures elapsed time by the monotonic clock, from the clock's
// creation: the stamp clock only asks about its first reading, taken then.
func (c *steppingClock) Since(time.Time) time.Duration { return time.Duration(c.mono.Load()) }

func (c *steppingClock) Advance(d time.Duration) { c.wall.Add(int64(d)); c.mono.Add(int64(d)) }
func (c *steppingClock) Step(d time.Duration)    { c.wall.Add(int64(d)) }

// A leader's clock jumping minutes ahead neither refills buckets nor makes
// the group forget request ids; before the guard it did both, for good.
func TestClockJumpRefillsNothingAndForgetsNoID(t *testing.T) {
	clock := newSteppingClock()
	n := startNode(t, t.TempDir(), clock)
	_, err := n.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: 10, Rate: bucket.Scale / 10}})
	require.NoError(t, err)
	ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "a", Cost: 10, RequestID: "x"}})
	require.NoError(t, err)
	require.True(t, ds[0].Allowed)

	clock.Step(10 * time.Minute) // 600 s at 0.1 token/s would refill all 10 tokens
	clock.Advance(time.Second)
	ds, err = n.Allow(ctx(t), []fsm.AllowRequest{{Client: "a", Cost: 1}})
	require.NoError(t, err)
	assert.False(t, ds[0].Allowed, "at most 2 s of refill (0.2 tokens) may be credited, got a token")
	ds, err = n.Allow(ctx(t), []fsm.AllowRequest{{Client: "a", Cost: 10, RequestID: "x"}})
	require.NoError(t, err)
	assert.True(t, ds[0].Duplicate, "the request id is still remembered")
}
