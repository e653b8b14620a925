package cluster

import (
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/cluster/raftgroup"
)

// Clock is the node's source of time (raftgroup.Clock: the batcher stamps
// entries with it).
type Clock = raftgroup.Clock

// SystemClock is the real wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// OffsetClock is a Clock shifted by an adjustable offset. The fault suite
// uses it, through a binary built with the faultinject tag, to skew one
// node's clock against the others; with a zero offset it is its base clock.
type OffsetClock struct {
	base   Clock
	offset atomic.Int64
}

// NewOffsetClock returns base shifted by nothing, for now.
func NewOffsetClock(base Clock) *OffsetClock { return &OffsetClock{base: base} }

// Now returns the base clock's time plus the offset.
func (c *OffsetClock) Now() time.Time { return c.base.Now().Add(time.Duration(c.offset.Load())) }

// SetOffset sets the offset; it may be negative.
func (c *OffsetClock) SetOffset(d time.Duration) { c.offset.Store(int64(d)) }

// Offset returns the current offset.
func (c *OffsetClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Unwrap returns the base clock. A change of offset is a step of the wall
// clock, not time passing: stampClock measures elapsed time on the base
// (Time.Add moves a reading's monotonic part with its wall part, so the
// readings of an OffsetClock cannot tell the two apart).
func (c *OffsetClock) Unwrap() Clock { return c.base }

// MaxClockStep is how far a node's wall clock may step forward while the
// node runs and still move the times it stamps entries with: beyond it,
// stamps follow the monotonic clock instead (see stampClock).
const MaxClockStep = time.Second

// elapsedClock is a Clock that measures elapsed time itself. Tests use it to
// step the wall clock without the monotonic clock; other clocks measure
// elapsed time with Time.Sub, which uses the monotonic readings that
// time.Now carries.
type elapsedClock interface {
	Clock
	Since(t time.Time) time.Duration
}

// stampClock is the clock a node stamps entries with: its Clock, held back
// to where that clock stood when the node started plus the time elapsed
// since by the monotonic clock, plus MaxClockStep. A wall clock that steps
// back is followed (the group's high-water time absorbs it: it can only
// make this node credit less refill); one that steps forward moves stamps
// by MaxClockStep at most, until the node restarts. So a clock jump while a
// node runs cannot refill buckets or expire remembered request ids
// early; only a clock that is already wrong when the node starts counts in
// the over-admission bound's Δ.
type stampClock struct {
	base  Clock
	start time.Time
	// mono is the clock elapsed time is measured on (base, or the clock an
	// OffsetClock wraps), and monoStart its reading at start.
	mono      Clock
	monoStart time.Time
	held      atomic.Int64              // ns the last reading was held back by
	warn      func(ahead time.Duration) // called when a stretch held back begins
}

func newStampClock(base Clock, warn func(ahead time.Duration)) *stampClock {
	mono := base
	for {
		u, ok := mono.(interface{ Unwrap() Clock })
		if !ok {
			break
		}
		mono = u.Unwrap()
	}
	return &stampClock{base: base, start: base.Now(), mono: mono, monoStart: mono.Now(), warn: warn}
}

// Now returns the base clock's time, held back as described above.
func (c *stampClock) Now() time.Time {
	now := c.base.Now()
	var elapsed time.Duration
	if e, ok := c.mono.(elapsedClock); ok {
		elapsed = e.Since(c.monoStart)
	} else {
		elapsed = c.mono.Now().Sub(c.monoStart)
	}
	limit := c.start.UnixNano() + int64(elapsed) + int64(MaxClockStep)
	if ahead := now.UnixNano() - limit; ahead > 0 {
		if c.held.Swap(ahead) == 0 && c.warn != nil {
			c.warn(time.Duration(ahead)) // once per stretch held back
		}
		return time.Unix(0, limit)
	}
	c.held.Store(0)
	return now
}

// HeldBack returns how far the last reading was held back (0: not at all).
func (c *stampClock) HeldBack() time.Duration { return time.Duration(c.held.Load()) }

// ManualClock is a Clock that moves only when told: for tests, and for
// tools that replay time. It starts at ManualClockStart.
type ManualClock struct{ ns atomic.Int64 }

// ManualClockStart is where every ManualClock starts.
var ManualClockStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewManualClock returns a ManualClock at ManualClockStart.
func NewManualClock() *ManualClock {
	c := &ManualClock{}
	c.ns.Store(ManualClockStart.UnixNano())
	return c
}

// Now returns the clock's time (without a monotonic reading).
func (c *ManualClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock by d.
func (c *ManualClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
