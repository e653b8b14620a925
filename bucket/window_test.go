package bucket

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func windowPolicy(limit, seconds int64) Policy {
	return Policy{Algorithm: SlidingWindow, Capacity: limit, Window: seconds * Second}
}

// windowModel is the definition, written out naively: every admission ever
// made, and a request fits when the cost admitted in (now-W, now] plus its
// own is at most the limit.
type windowModel struct{ at, cost []int64 }

func (m *windowModel) used(p Policy, now int64) int64 {
	var u int64
	for i, a := range m.at {
		if now-a < p.Window {
			u += m.cost[i]
		}
	}
	return u
}

func (m *windowModel) decide(p Policy, now, cost int64) bool {
	if m.used(p, now)+cost > p.Capacity {
		return false
	}
	if cost > 0 {
		m.at, m.cost = append(m.at, now), append(m.cost, cost)
	}
	return true
}

func TestSlidingWindowAgreesWithItsDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 2))
	for run := 0; run < 200; run++ {
		p := windowPolicy(1+rng.Int64N(20), 1+rng.Int64N(5))
		var w Window
		var m windowModel
		now := int64(1_000) * Second
		for i := 0; i < 300; i++ {
			now += rng.Int64N(p.Window / 2)
			cost := rng.Int64N(4)
			var d Decision
			w, d = DecideWindow(p, w, now, cost)
			require.Equal(t, m.decide(p, now, cost), d.Allowed, "run %d step %d: %+v at %d cost %d", run, i, p, now, cost)
			used := m.used(p, now)
			assert.Equal(t, used, w.Used, "used")
			assert.Equal(t, (p.Capacity-min(used, p.Capacity))*Scale, d.Remaining, "remaining")
			if !d.Allowed && d.RetryAfter != Never {
				// The retry time is exact: the request fits then, not a
				// nanosecond before.
				require.Positive(t, d.RetryAfter)
				assert.LessOrEqual(t, m.used(p, now+d.RetryAfter)+cost, p.Capacity, "fits at the retry time")
				assert.Greater(t, m.used(p, now+d.RetryAfter-1)+cost, p.Capacity, "does not fit just before")
			}
			if d.ResetAfter > 0 {
				assert.Zero(t, m.used(p, now+d.ResetAfter), "empty at the reset time")
				assert.Positive(t, m.used(p, now+d.ResetAfter-1), "not empty just before")
			}
			assert.Equal(t, used == 0, WindowEmpty(p, w, now), "empty")
		}
	}
}

// The boundary question: a bucket of 60 refilling 1 a second and a window
// of 60 a minute both allow 60 a minute on average and 60 at once. Asked
// for all they will give, every second for a minute, the bucket admits its
// 60 and then 1 more each second it refilled: 119 within 60 seconds. The
// window admits its 60 and then nothing until they are a minute old.
func TestSlidingWindowRefusesTheBurstABucketAdmitsAtTheBoundary(t *testing.T) {
	bucketP := Policy{Capacity: 60, Rate: Scale}
	windowP := windowPolicy(60, 60)
	t0 := int64(1_700_000_000) * Second
	s := New(bucketP, t0)
	var w Window
	var byBucket, byWindow int
	for sec := int64(0); sec < 60; sec++ {
		at := t0 + sec*Second
		for {
			var d Decision
			if s, d = Decide(bucketP, s, at, 1); !d.Allowed {
				break
			}
			byBucket++
		}
		for {
			var d Decision
			if w, d = DecideWindow(windowP, w, at, 1); !d.Allowed {
				break
			}
			byWindow++
		}
	}
	assert.Equal(t, 119, byBucket, "bucket: 60 at once, then the refill")
	assert.Equal(t, 60, byWindow, "window: at most the limit in any 60 s")
	_, d := DecideWindow(windowP, w, t0+60*Second, 1)
	assert.True(t, d.Allowed, "window, second 60: the first 60 are a minute old")
	assert.Equal(t, int64(59)*Scale, d.Remaining)
}

func TestSlidingWindowKeepsSharedLogsUnchanged(t *testing.T) {
	p := windowPolicy(100, 10)
	var w Window
	now := int64(0)
	for i := 0; i < 50; i++ {
		now += Second / 2
		w, _ = DecideWindow(p, w, now, 1)
	}
	kept := w
	copyOfKept := append([]Admission(nil), kept.Log...)
	for i := 0; i < 500; i++ {
		now += Second / 3
		w, _ = DecideWindow(p, w, now, 1+int64(i%3))
	}
	assert.Equal(t, copyOfKept, kept.Log, "a later decision changed a window kept before it")
	assert.LessOrEqual(t, len(w.Log), int(p.Capacity), "the log holds at most limit entries")
}

func TestSlidingWindowPolicyChanges(t *testing.T) {
	p := windowPolicy(10, 10)
	now := int64(100) * Second
	var w Window
	for i := 0; i < 8; i++ {
		w, _ = DecideWindow(p, w, now+int64(i)*Second, 1)
	}
	// Shrinking the limit to 5: 8 admitted still count, so nothing fits
	// until 4 of them expire.
	small := windowPolicy(5, 10)
	w2, d := DecideWindow(small, w, now+8*Second, 1)
	assert.False(t, d.Allowed)
	assert.Zero(t, d.Remaining)
	assert.Equal(t, 5*Second, d.RetryAfter, "admissions at 0..3 s must expire: the last of them at 13 s")
	_, d = DecideWindow(small, w2, now+13*Second, 1)
	assert.True(t, d.Allowed)
	// Shortening the window to 3 s: only the admissions of the last 3 s count.
	short := windowPolicy(10, 3)
	_, d = DecideWindow(short, w, now+8*Second, 10)
	assert.False(t, d.Allowed, "admissions at 6 and 7 s still count")
	_, d = DecideWindow(short, w, now+8*Second, 8)
	assert.True(t, d.Allowed)
}

func TestConversionsBetweenAlgorithmsGiftNothing(t *testing.T) {
	bp := Policy{Capacity: 20, Rate: Scale}
	wp := windowPolicy(10, 60)
	now := int64(50) * Second
	s := State{Tokens: 4 * Scale, Last: now - 2*Second} // 6 by now
	w := BucketToWindow(bp, s, wp, now)
	assert.Equal(t, int64(4), w.Used, "10 - 6 counts as admitted")
	d := PeekWindow(wp, w, now, 1)
	assert.Equal(t, int64(6)*Scale, d.Remaining)
	full := BucketToWindow(bp, State{Tokens: 20 * Scale, Last: now}, wp, now)
	assert.Zero(t, full.Used, "a full bucket becomes an empty window")

	back := WindowToBucket(wp, w, bp, now+Second)
	assert.Equal(t, State{Tokens: 6 * Scale, Last: now + Second}, back)
	tiny := WindowToBucket(wp, w, Policy{Capacity: 2, Rate: Scale}, now)
	assert.Equal(t, int64(2)*Scale, tiny.Tokens, "clamped to the new capacity")
}

func TestSpecParse(t *testing.T) {
	p, err := Spec{Algorithm: "sliding_window", Limit: "100", WindowSeconds: "60", Mode: "shadow", WhenUnavailable: "allow"}.Parse()
	require.NoError(t, err)
	assert.Equal(t, Policy{Algorithm: SlidingWindow, Capacity: 100, Window: 60 * Second, Mode: Shadow, WhenUnavailable: AllowDegraded}, p)
	assert.True(t, p.Extended())
	back, err := SpecOf(p).Parse()
	require.NoError(t, err)
	assert.Equal(t, p, back, "SpecOf round trip")
	plain, err := SpecOf(Policy{Capacity: 5, Rate: Scale / 4}).Parse()
	require.NoError(t, err)
	assert.Equal(t, Policy{Capacity: 5, Rate: Scale / 4}, plain)
	assert.False(t, plain.Extended())

	for _, bad := range []Spec{
		{Algorithm: "sliding_window", Limit: "10"},
		{Algorithm: "sliding_window", WindowSeconds: "10"},
		{Algorithm: "sliding_window", Limit: "10001", WindowSeconds: "10"},
		{Algorithm: "sliding_window", Limit: "10", WindowSeconds: "0"},
		{Algorithm: "sliding_window", Limit: "10", WindowSeconds: "1.5"},
		{Algorithm: "sliding_window", Limit: "10", WindowSeconds: "86401"},
		{Algorithm: "sliding_window", Limit: "10", WindowSeconds: "10", Capacity: "5"},
		{Capacity: "5", RefillPerSecond: "1", Limit: "3"},
		{Capacity: "5", RefillPerSecond: "1", Mode: "dry-run"},
		{Capacity: "5", RefillPerSecond: "1", WhenUnavailable: "open"},
		{Algorithm: "leaky", Capacity: "5", RefillPerSecond: "1"},
	} {
		_, err := bad.Parse()
		assert.ErrorIs(t, err, ErrInvalidPolicy, "%+v", bad)
	}
}

func TestFillIsRecordedOnlyForARaise(t *testing.T) {
	c, err := NewConfig(BuiltinDefault)
	require.NoError(t, err)
	c, err = c.WithTier("pro", Policy{Capacity: 10, Rate: Scale}, Fill)
	require.NoError(t, err)
	assert.Empty(t, c.Filled, "creating a tier is not a raise")
	c, err = c.WithTier("pro", Policy{Capacity: 20, Rate: Scale}, Fill)
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"pro": 2}, c.Filled)
	c, err = c.WithTier("pro", Policy{Capacity: 20, Rate: Scale}, Fill)
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"pro": 2}, c.Filled, "the same change again fills nothing")
	c, err = c.WithTier("pro", Policy{Capacity: 30, Rate: Scale}, Keep)
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"pro": 2}, c.Filled, "a raise with keep fills nothing")
	c, err = c.WithDefault(Policy{Capacity: 50, Rate: Scale}, Fill)
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"pro": 2, DefaultTierName: 5}, c.Filled)
	require.NoError(t, c.Validate())
	c, _ = c.WithoutTier("pro")
	assert.Equal(t, map[string]uint64{DefaultTierName: 5}, c.Filled, "a deleted tier's fill goes with it")
}
