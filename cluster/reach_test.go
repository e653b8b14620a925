package cluster

import (
	"testing"
	"time"

	"github.com/quorate/quorate/cluster/clock"
	"github.com/stretchr/testify/assert"
)

// Silence is evidence of a cut only while the node was running to hear it:
// not right after it started, nor right after a pause or a stall.
func TestReachJudgesOnlyAfterAWholeWindowAwake(t *testing.T) {
	clock := clock.NewManual()
	r := newReach(clock.Now, 400*time.Millisecond)
	assert.False(t, r.awake(), "just started")
	for range 4 {
		clock.Advance(100 * time.Millisecond)
		r.tick()
	}
	assert.True(t, r.awake(), "a whole window of ticks")

	r.contact("b:1")
	assert.Equal(t, clock.Now(), r.last("b:1"))
	assert.True(t, r.last("c:1").IsZero(), "never heard")

	clock.Advance(time.Second) // paused: no tick for more than half the window
	assert.False(t, r.awake(), "resumed before the ticker ran")
	r.tick()
	assert.False(t, r.awake(), "the gap restarts the window")
	for range 3 {
		clock.Advance(100 * time.Millisecond)
		r.tick()
	}
	assert.False(t, r.awake())
	clock.Advance(100 * time.Millisecond)
	r.tick()
	assert.True(t, r.awake())
}
