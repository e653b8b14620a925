package reach

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
	r := New(clock.Now, 400*time.Millisecond)
	assert.False(t, r.Awake(), "just started")
	for range 4 {
		clock.Advance(100 * time.Millisecond)
		r.Tick()
	}
	assert.True(t, r.Awake(), "a whole window of ticks")

	r.Contact("b:1")
	assert.Equal(t, clock.Now(), r.Last("b:1"))
	assert.True(t, r.Last("c:1").IsZero(), "never heard")

	clock.Advance(time.Second) // paused: no tick for more than half the window
	assert.False(t, r.Awake(), "resumed before the ticker ran")
	r.Tick()
	assert.False(t, r.Awake(), "the gap restarts the window")
	for range 3 {
		clock.Advance(100 * time.Millisecond)
		r.Tick()
	}
	assert.False(t, r.Awake())
	clock.Advance(100 * time.Millisecond)
	r.Tick()
	assert.True(t, r.Awake())
}
