package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStampClockHoldsBackForwardSteps(t *testing.T) {
	base := NewStepping()
	var warned []time.Duration
	c := NewStamp(base, func(ahead time.Duration) { warned = append(warned, ahead) })
	start := base.Now()

	base.Advance(3 * time.Second)
	assert.Equal(t, start.Add(3*time.Second), c.Now(), "follows a clock that runs")
	base.Step(10 * time.Minute)
	assert.Equal(t, start.Add(3*time.Second+MaxClockStep), c.Now(), "a step forward moves stamps by MaxClockStep at most")
	assert.Equal(t, 10*time.Minute-MaxClockStep, c.HeldBack())
	base.Advance(2 * time.Second)
	assert.Equal(t, start.Add(5*time.Second+MaxClockStep), c.Now(), "and then stamps follow the monotonic clock")
	require.Len(t, warned, 1, "warned once per stretch")
	base.Step(-20 * time.Minute)
	assert.Equal(t, base.Now(), c.Now(), "a step back is followed")
	assert.Zero(t, c.HeldBack())
	base.Step(10*time.Minute + MaxClockStep/2)
	assert.Equal(t, base.Now(), c.Now(), "small steps forward are followed")
}

// A node that started with its clock ahead and had it set right while it
// ran is held, once a check found its clock in bounds, to the right clock:
// a later jump ahead moves its stamps by MaxClockStep at most. Anchored at
// its start only, it took the jump back to where it started whole (the
// fault suite's clock-restart-ahead on a node, then clock-jump-ahead on the
// same node, found stamps 2 s ahead).
func TestStampClockRebasesToAClockFoundInBounds(t *testing.T) {
	base := NewStepping()
	c := NewStamp(base, nil)
	started := base.Now() // 2 s ahead of the others, say
	base.Step(-2 * time.Second)
	base.Advance(time.Second)
	assert.Equal(t, base.Now(), c.Now(), "a step back is followed")
	c.Rebase(c.Mark()) // a check found the corrected clock in bounds

	base.Step(2 * time.Second) // the same 2 s again
	got := c.Now()
	assert.Equal(t, started.Add(-2*time.Second+time.Second+MaxClockStep), got, "held to the corrected clock plus MaxClockStep")
	assert.Equal(t, 2*time.Second-MaxClockStep, c.HeldBack())

	// A mark taken while the clock was ahead, from a check that ended after
	// a later one, is not taken in.
	stale := c.Mark()
	base.Step(-2 * time.Second)
	base.Advance(time.Second)
	c.Rebase(c.Mark())
	c.Rebase(stale)
	right := base.Now()
	base.Step(2 * time.Second)
	assert.Equal(t, right.Add(MaxClockStep), c.Now())
}

// An Offset clock's step is a step of the wall clock, not time passing: the
// Stamp over it holds a forward step to MaxClockStep. (Time.Add moves
// a reading's monotonic part too, so measured on the Offset clock's own
// readings the step looked like elapsed time and passed whole; the fault
// suite's clock-jump-ahead found stamps 2 s ahead.)
func TestStampClockHoldsAnOffsetClocksStep(t *testing.T) {
	oc := NewOffset(System{})
	sc := NewStamp(oc, nil)
	before := time.Now()
	oc.SetOffset(10 * time.Second)
	got := sc.Now()
	after := time.Now()
	assert.False(t, got.After(after.Add(MaxClockStep)), "stamp %v is more than MaxClockStep past the real time %v", got, after)
	assert.True(t, got.After(before), "the stamp still moves forward")
	assert.Positive(t, sc.HeldBack())
	oc.SetOffset(-time.Second)
	assert.WithinDuration(t, time.Now().Add(-time.Second), sc.Now(), 100*time.Millisecond, "a step back is followed")
}
