package clock

import (
	"sync/atomic"
	"time"
)

// MaxClockStep is how far a node's wall clock may step forward while the
// node runs and still move the times it stamps entries with: beyond it,
// stamps follow the monotonic clock instead (see Stamp).
const MaxClockStep = time.Second

// elapsedClock is a Clock that measures elapsed time itself. Tests use it to
// step the wall clock without the monotonic clock; other clocks measure
// elapsed time with Time.Sub, which uses the monotonic readings that
// time.Now carries.
type elapsedClock interface {
	Clock
	Since(t time.Time) time.Duration
}

// Stamp is the clock a node stamps entries with: its base Clock, held back
// to where that clock stood at its anchor plus the time elapsed since by
// the monotonic clock, plus MaxClockStep. The anchor is the moment the
// Stamp was made (the node's start), and then every clock check that finds
// the clock in bounds (Rebase): a node that started with its clock ahead
// and had it set right while it ran is held to the right clock, not to the
// wrong one it started with. A wall clock that steps back is followed (the
// group's high-water time absorbs it: it can only make this node credit
// less refill); one that steps forward moves stamps by MaxClockStep at
// most, until a check finds it in bounds again (and a check finds a clock
// half the allowed offset off the others' out of bounds: it stamps nothing
// then). So a clock jump while a node runs cannot refill buckets or expire
// remembered request ids early; only a clock that is wrong when it is
// checked counts in the over-admission bound's Δ.
type Stamp struct {
	base Clock
	// mono is the clock elapsed time is measured on (base, or the clock an
	// Offset wraps), and monoStart its reading at start.
	mono      Clock
	monoStart time.Time
	anchor    atomic.Pointer[Mark]
	held      atomic.Int64              // ns the last reading was held back by
	warn      func(ahead time.Duration) // called when a stretch held back begins
}

// Mark is a reading of the base clock (wall, Unix ns) with the time
// elapsed on the monotonic clock since the Stamp was made.
type Mark struct{ wall, elapsed int64 }

// NewStamp returns a Stamp over base, anchored now. warn, if not nil, is
// called each time a stretch of readings held back begins, with how far
// the base clock is ahead.
func NewStamp(base Clock, warn func(ahead time.Duration)) *Stamp {
	mono := base
	for {
		u, ok := mono.(interface{ Unwrap() Clock })
		if !ok {
			break
		}
		mono = u.Unwrap()
	}
	wall := base.Now().UnixNano() // before monoStart: elapsed time is never short
	c := &Stamp{base: base, mono: mono, monoStart: mono.Now(), warn: warn}
	c.anchor.Store(&Mark{wall: wall})
	return c
}

func (c *Stamp) elapsed() time.Duration {
	if e, ok := c.mono.(elapsedClock); ok {
		return e.Since(c.monoStart)
	}
	return c.mono.Now().Sub(c.monoStart)
}

// Mark reads the clock for a later Rebase.
func (c *Stamp) Mark() Mark {
	wall := c.base.Now().UnixNano() // before elapsed, as at start
	return Mark{wall: wall, elapsed: int64(c.elapsed())}
}

// Rebase makes m the anchor stamps are held to: for the clock guard, with
// a mark taken before the readings that found the clock in bounds, so that
// a step after them is not taken in.
func (c *Stamp) Rebase(m Mark) {
	if a := c.anchor.Load(); m.elapsed >= a.elapsed {
		c.anchor.CompareAndSwap(a, &m) // a later mark that won the race stays
	}
}

// Now returns the base clock's time, held back as described above.
func (c *Stamp) Now() time.Time {
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
func (c *Stamp) HeldBack() time.Duration { return time.Duration(c.held.Load()) }
