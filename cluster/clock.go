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
// to where that clock stood at its anchor plus the time elapsed since by
// the monotonic clock, plus MaxClockStep. The anchor is the node's start,
// and then every clock check that finds the clock in bounds (Rebase): a
// node that started with its clock ahead and had it set right while it
// ran is held to the right clock, not to the wrong one it started with. A
// wall clock that steps back is followed (the group's high-water time
// absorbs it: it can only make this node credit less refill); one that
// steps forward moves stamps by MaxClockStep at most, until a check finds
// it in bounds again (and a check finds a clock MaxClockOffset/2 off the
// others' out of bounds: it stamps nothing then). So a clock jump while a
// node runs cannot refill buckets or expire remembered request ids early;
// only a clock that is wrong when it is checked counts in the
// over-admission bound's Δ.
type stampClock struct {
	base Clock
	// mono is the clock elapsed time is measured on (base, or the clock an
	// OffsetClock wraps), and monoStart its reading at start.
	mono      Clock
	monoStart time.Time
	anchor    atomic.Pointer[clockMark]
	held      atomic.Int64              // ns the last reading was held back by
	warn      func(ahead time.Duration) // called when a stretch held back begins
}

// clockMark is a reading of the base clock (wall, Unix ns) with the time
// elapsed on the monotonic clock since the stampClock was made.
type clockMark struct{ wall, elapsed int64 }

func newStampClock(base Clock, warn func(ahead time.Duration)) *stampClock {
	mono := base
	for {
		u, ok := mono.(interface{ Unwrap() Clock })
		if !ok {
			break
		}
		mono = u.Unwrap()
	}
	wall := base.Now().UnixNano() // before monoStart: elapsed time is never short
	c := &stampClock{base: base, mono: mono, monoStart: mono.Now(), warn: warn}
	c.anchor.Store(&clockMark{wall: wall})
	return c
}

func (c *stampClock) elapsed() time.Duration {
	if e, ok := c.mono.(elapsedClock); ok {
		return e.Since(c.monoStart)
	}
	return c.mono.Now().Sub(c.monoStart)
}

// Mark reads the clock for a later Rebase.
func (c *stampClock) Mark() clockMark {
	wall := c.base.Now().UnixNano() // before elapsed, as at start
	return clockMark{wall: wall, elapsed: int64(c.elapsed())}
}

// Rebase makes m the anchor stamps are held to: for the clock guard, with
// a mark taken before the readings that found the clock in bounds, so that
// a step after them is not taken in.
func (c *stampClock) Rebase(m clockMark) {
	if a := c.anchor.Load(); m.elapsed >= a.elapsed {
		c.anchor.CompareAndSwap(a, &m) // a later mark that won the race stays
	}
}

// Now returns the base clock's time, held back as described above.
func (c *stampClock) Now() time.Time {
	now := c.base.Now()
	a := c.anchor.Load()
	limit := a.wall + int64(c.elapsed()) - a.elapsed + int64(MaxClockStep)
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
