package bucket

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// t0 is an arbitrary fixed start time (nanoseconds since the epoch).
const t0 = int64(1_700_000_000) * int64(time.Second)

func at(d time.Duration) int64 { return t0 + int64(d) }

func tokens(n int64) int64 { return n * Scale }

// step is one decision in a step table; setPolicy, when non-nil, replaces the
// policy before the decision.
type step struct {
	t         time.Duration
	cost      int64
	setPolicy *Policy
	allowed   bool
	remaining int64 // whole tokens after the decision
}

func runSteps(t *testing.T, p Policy, steps []step) {
	t.Helper()
	var s State
	exists := false
	for i, st := range steps {
		if st.setPolicy != nil {
			p = *st.setPolicy
		}
		if !exists {
			s, exists = New(p, at(st.t)), true
		}
		var d Decision
		s, d = Decide(p, s, at(st.t), st.cost)
		assert.Equal(t, st.allowed, d.Allowed, "step %d: Decide(%v, cost %d).Allowed = %v, want %v", i, st.t, st.cost, d.Allowed, st.allowed)
		assert.Equal(t, st.remaining, d.RemainingTokens(), "step %d: Decide(%v, cost %d) remaining = %d, want %d", i, st.t, st.cost, d.RemainingTokens(), st.remaining)
	}
}

// TestWorkedExample is README.md's worked example ("Try it"), step by
// step.
func TestWorkedExample(t *testing.T) {
	free := Policy{Capacity: 5, Rate: 1 * Scale}
	raised := Policy{Capacity: 10, Rate: 1 * Scale}
	lowered := Policy{Capacity: 2, Rate: 1 * Scale}
	runSteps(t, free, []step{
		// t=0: five admitted, the sixth denied.
		{t: 0, cost: 1, allowed: true, remaining: 4},
		{t: 0, cost: 1, allowed: true, remaining: 3},
		{t: 0, cost: 1, allowed: true, remaining: 2},
		{t: 0, cost: 1, allowed: true, remaining: 1},
		{t: 0, cost: 1, allowed: true, remaining: 0},
		{t: 0, cost: 1, allowed: false, remaining: 0},
		// t=2s: two refilled, two admitted, the third denied.
		{t: 2 * time.Second, cost: 1, allowed: true, remaining: 1},
		{t: 2 * time.Second, cost: 1, allowed: true, remaining: 0},
		{t: 2 * time.Second, cost: 1, allowed: false, remaining: 0},
		// Raise to capacity 10: the balance continues from 0, not 10.
		{t: 2 * time.Second, cost: 0, setPolicy: &raised, allowed: true, remaining: 0},
		{t: 5 * time.Second, cost: 0, allowed: true, remaining: 3},
		// Lower to 2: clamped to 2 at once.
		{t: 5 * time.Second, cost: 0, setPolicy: &lowered, allowed: true, remaining: 2},
		{t: 5 * time.Second, cost: 1, allowed: true, remaining: 1},
		{t: 5 * time.Second, cost: 1, allowed: true, remaining: 0},
		{t: 5 * time.Second, cost: 1, allowed: false, remaining: 0},
	})
}

func TestWorkedExampleDefaultFallback(t *testing.T) {
	cfg, err := NewConfig(Policy{Capacity: 3, Rate: Scale / 2})
	require.NoError(t, err)
	cfg, err = cfg.WithTier("free", Policy{Capacity: 5, Rate: Scale}, Keep)
	require.NoError(t, err)
	cfg.Tiers["broken"] = Policy{Capacity: 0, Rate: Scale} // as if loaded from an old file

	for _, tier := range []string{"", "missing", "broken"} {
		name, p := cfg.Resolve(tier)
		assert.Equal(t, DefaultTierName, name, "Resolve(%q) name", tier)
		assert.Equal(t, cfg.Default, p, "Resolve(%q) policy", tier)
	}
	name, p := cfg.Resolve("free")
	assert.Equal(t, "free", name)
	assert.Equal(t, Policy{Capacity: 5, Rate: Scale}, p)
}

// A refill that multiplies elapsed time by capacity instead of rate would
// give 5 tokens after one second here.
func TestRefillUsesRateNotCapacity(t *testing.T) {
	p := Policy{Capacity: 5, Rate: Scale}
	s := New(p, at(0))
	for range 5 {
		s, _ = Decide(p, s, at(0), 1)
	}
	s, d := Decide(p, s, at(time.Second), 0)
	assert.Equal(t, int64(1), d.RemainingTokens())
	_, d = Decide(p, s, at(time.Second+500*time.Millisecond), 0)
	assert.Equal(t, tokens(1)+Scale/2, d.Remaining)
}

func TestRaiseGiftsNothingLowerClamps(t *testing.T) {
	p := Policy{Capacity: 5, Rate: Scale}
	s := New(p, at(0))
	s, _ = Decide(p, s, at(0), 4) // balance 1

	up := Policy{Capacity: 100, Rate: Scale}
	s, d := Decide(up, s, at(0), 0)
	assert.Equal(t, tokens(1), d.Remaining, "raise must not add tokens")
	assert.Equal(t, int64(99)*int64(time.Second), d.ResetAfter, "refills toward the new cap at the rate")

	s, _ = Decide(up, s, at(50*time.Second), 0) // balance 51
	down := Policy{Capacity: 3, Rate: Scale}
	_, d = Decide(down, s, at(50*time.Second), 0)
	assert.Equal(t, tokens(3), d.Remaining, "lowering must clamp at once")
}

func TestRateChangeAppliesFromLastDecision(t *testing.T) {
	p := Policy{Capacity: 100, Rate: Scale}
	s := New(p, at(0))
	s, _ = Decide(p, s, at(0), 100)
	// Ten seconds pass; the rate becomes 3/s before the next decision, so all
	// ten seconds are credited at 3/s.
	fast := Policy{Capacity: 100, Rate: 3 * Scale}
	_, d := Decide(fast, s, at(10*time.Second), 0)
	assert.Equal(t, tokens(30), d.Remaining)
}

func TestClockBackwardsIsClamped(t *testing.T) {
	p := Policy{Capacity: 2, Rate: Scale}
	s := New(p, at(10*time.Second))
	s, _ = Decide(p, s, at(10*time.Second), 2)
	s, d := Decide(p, s, at(5*time.Second), 1)
	assert.False(t, d.Allowed, "going back in time must not refill")
	assert.Equal(t, at(10*time.Second), s.Last, "Last never moves back")
	_, d = Decide(p, s, at(11*time.Second), 1)
	assert.True(t, d.Allowed, "one second after the real last decision refills one token")
}

func TestRetryAndResetAfter(t *testing.T) {
	p := Policy{Capacity: 4, Rate: Scale / 4} // one token every 4 s
	s := New(p, at(0))
	s, _ = Decide(p, s, at(0), 4)
	s, d := Decide(p, s, at(time.Second), 1)
	assert.False(t, d.Allowed)
	assert.Equal(t, int64(3*time.Second), d.RetryAfter)
	assert.Equal(t, int64(15*time.Second), d.ResetAfter)

	_, d = Decide(p, s, at(time.Second), 5)
	assert.Equal(t, Never, d.RetryAfter, "cost above capacity never succeeds")

	zero := Policy{Capacity: 4, Rate: 0}
	_, d = Decide(zero, s, at(time.Second), 1)
	assert.False(t, d.Allowed)
	assert.Equal(t, Never, d.RetryAfter)
	assert.Equal(t, Never, d.ResetAfter)

	full := New(p, at(0))
	_, d = Decide(p, full, at(0), 0)
	assert.Zero(t, d.ResetAfter)
	assert.Zero(t, d.RetryAfter)
}

func TestRetryAfterRoundsUpWithCarry(t *testing.T) {
	p := Policy{Capacity: 1, Rate: 3 * Scale} // a token every 333.33 ms
	s := New(p, at(0))
	s, _ = Decide(p, s, at(0), 1)
	s, d := Decide(p, s, at(100*time.Millisecond), 1)
	require.False(t, d.Allowed)
	// After the retry wait the request must succeed, and not one ns earlier.
	wait := d.RetryAfter
	_, early := Decide(p, s, at(100*time.Millisecond)+wait-1, 1)
	_, ok := Decide(p, s, at(100*time.Millisecond)+wait, 1)
	assert.False(t, early.Allowed, "allowed before RetryAfter elapsed")
	assert.True(t, ok.Allowed, "still denied after RetryAfter elapsed")
}

func TestCarryKeepsRefillExact(t *testing.T) {
	// 1/3 token per second is 333333333 nanotokens/s: exact in the policy.
	// Deciding every nanosecond-odd interval must not lose fractions.
	p := Policy{Capacity: 1000, Rate: 333_333_333}
	s := New(p, at(0))
	s, _ = Decide(p, s, at(0), 1000)
	var now int64 = at(0)
	for range 1000 {
		now += 7 // 7 ns: 2.333333331 nanotokens each time
		s, _ = Decide(p, s, now, 0)
	}
	// 7000 ns × 333333333 nt/s = 2333.333331 nanotokens.
	assert.Equal(t, int64(2333), s.Tokens)
	assert.Equal(t, int64(333_331_000), s.Carry)
}

func TestOverflowSafety(t *testing.T) {
	p := Policy{Capacity: MaxCapacity, Rate: MaxRate}
	s := New(p, 0)
	s, d := Decide(p, s, 0, MaxCost)
	require.True(t, d.Allowed)
	// Centuries later, at the largest rate: full, no overflow.
	s, d = Decide(p, s, math.MaxInt64, 0)
	assert.Equal(t, int64(MaxCapacity)*Scale, d.Remaining)
	assert.Equal(t, int64(math.MaxInt64), s.Last)

	slow := Policy{Capacity: MaxCapacity, Rate: 1}
	s = New(slow, 0)
	s, _ = Decide(slow, s, 0, MaxCost)
	_, d = Decide(slow, s, 0, 1)
	assert.False(t, d.Allowed)
	assert.Equal(t, int64(Scale)*Scale, d.RetryAfter, "one token at one nanotoken per second")
	_, d = Decide(slow, s, 0, MaxCost)
	assert.Equal(t, int64(math.MaxInt64), d.RetryAfter, "wait longer than int64 ns saturates")
}

func TestIsFull(t *testing.T) {
	p := Policy{Capacity: 2, Rate: Scale}
	s := New(p, at(0))
	assert.True(t, IsFull(p, s, at(0)))
	s, _ = Decide(p, s, at(0), 1)
	assert.False(t, IsFull(p, s, at(0)))
	assert.False(t, IsFull(p, s, at(999*time.Millisecond)))
	assert.True(t, IsFull(p, s, at(time.Second)))
	assert.False(t, IsFull(Policy{Capacity: 2, Rate: 0}, s, at(time.Hour)), "a rate-0 bucket never refills")
}

func TestPeekMatchesDecide(t *testing.T) {
	p := Policy{Capacity: 3, Rate: Scale}
	s := New(p, at(0))
	s, _ = Decide(p, s, at(0), 3)
	pk := Peek(p, s, at(1500*time.Millisecond), 2)
	_, d := Decide(p, s, at(1500*time.Millisecond), 2)
	assert.False(t, pk.Allowed)
	assert.Equal(t, d.Allowed, pk.Allowed)
	assert.Equal(t, d.RetryAfter, pk.RetryAfter)
	assert.Equal(t, tokens(1)+Scale/2, pk.Remaining)
}
