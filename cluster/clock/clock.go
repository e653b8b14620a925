// Package clock holds a node's sources of time and what it needs to trust
// them: the real clock (System), one shifted by an adjustable offset for
// the fault suite (Offset), one that moves only when told for tests and
// replays (Manual), the clock a node stamps entries with, which holds back
// a wall clock that steps forward while the node runs (Stamp), and the
// judgment of whether this node's clock agrees with its peers' (Judge), and
// the guard that reads the peers' clocks and keeps the verdict (Guard). What
// the node does with the verdict (refusing to stamp, handing leadership
// over) is the node's (package cluster).
package clock

import (
	"sync/atomic"
	"time"
)

// Clock is a source of time. A group's leader stamps every entry it
// proposes with Clock.Now() (raftgroup.Clock is the same interface, as the
// batcher asks for it). Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
}

// System is the real wall clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Offset is a Clock shifted by an adjustable offset. The fault suite uses
// it, through a binary built with the faultinject tag, to skew one node's
// clock against the others; with a zero offset it is its base clock.
type Offset struct {
	base   Clock
	offset atomic.Int64
}

// NewOffset returns base shifted by nothing, for now.
func NewOffset(base Clock) *Offset { return &Offset{base: base} }

// Now returns the base clock's time plus the offset.
func (c *Offset) Now() time.Time { return c.base.Now().Add(time.Duration(c.offset.Load())) }

// SetOffset sets the offset; it may be negative.
func (c *Offset) SetOffset(d time.Duration) { c.offset.Store(int64(d)) }

// Offset returns the current offset.
func (c *Offset) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Unwrap returns the base clock. A change of offset is a step of the wall
// clock, not time passing: Stamp measures elapsed time on the base
// (Time.Add moves a reading's monotonic part with its wall part, so the
// readings of an Offset cannot tell the two apart).
func (c *Offset) Unwrap() Clock { return c.base }

// Manual is a Clock that moves only when told: for tests, and for tools
// that replay time. It starts at ManualStart.
type Manual struct{ ns atomic.Int64 }

// ManualStart is where every Manual clock starts.
var ManualStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewManual returns a Manual clock at ManualStart.
func NewManual() *Manual {
	c := &Manual{}
	c.ns.Store(ManualStart.UnixNano())
	return c
}

// Now returns the clock's time (without a monotonic reading).
func (c *Manual) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock by d.
func (c *Manual) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Stepping is a Clock for tests of clocks that jump: its wall clock can
// step on its own (Step) while its monotonic clock only advances (Advance
// moves both), as a real host's do. It starts at ManualStart.
type Stepping struct{ wall, mono atomic.Int64 }

// NewStepping returns a Stepping clock at ManualStart.
func NewStepping() *Stepping {
	c := &Stepping{}
	c.wall.Store(ManualStart.UnixNano())
	return c
}

// Now returns the wall clock's time.
func (c *Stepping) Now() time.Time { return time.Unix(0, c.wall.Load()) }

// Since measures elapsed time by the monotonic clock, from the clock's
// creation: the stamp clock only asks about its first reading, taken then.
func (c *Stepping) Since(time.Time) time.Duration { return time.Duration(c.mono.Load()) }

// Advance moves both clocks by d.
func (c *Stepping) Advance(d time.Duration) { c.wall.Add(int64(d)); c.mono.Add(int64(d)) }

// Step moves the wall clock alone by d (a step of the host's clock).
func (c *Stepping) Step(d time.Duration) { c.wall.Add(int64(d)) }
