package cluster

import "time"

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
