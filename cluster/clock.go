package cluster

import (
	"sync/atomic"
	"time"
)

// Clock is the node's source of time. The leader of a group stamps every
// entry it proposes with Clock.Now(); nothing else in the decision path
// reads time. Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
}

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
