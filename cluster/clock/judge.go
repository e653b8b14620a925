package clock

import (
	"cmp"
	"slices"
	"time"
)

// Reading is one peer's clock as this node read it.
type Reading struct {
	Offset      time.Duration // the peer's clock minus this node's
	Uncertainty time.Duration // half the round trip of the reading
	InBounds    bool          // the peer's own check finds its clock in bounds (gossip)
}

// Judge decides whether this node's clock is in bounds, given its peers'
// readings and whether it was in bounds before, and returns its offset
// from the reference: the median of the clocks that are in bounds (this
// node's among them if it is), or of every clock read when none is (a
// cluster starting together). A node is in bounds when it is within
// limit/2 of that median, the readings' uncertainty included, so that any
// two nodes judged against the same median are within limit of each other:
// Δ in the over-admission bound. A newcomer is judged against the nodes
// already in bounds and does not move their median, so one node with a
// wrong clock cannot push a good node out.
func Judge(readings []Reading, wasInBounds bool, limit time.Duration) (inBounds bool, offset time.Duration) {
	var ref []Reading
	for _, r := range readings {
		if r.InBounds {
			ref = append(ref, r)
		}
	}
	switch {
	case wasInBounds:
		ref = append(ref, Reading{InBounds: true})
	case len(ref) == 0:
		ref = append(slices.Clone(readings), Reading{})
	}
	slices.SortFunc(ref, func(a, b Reading) int { return cmp.Compare(a.Offset, b.Offset) })
	mid := len(ref) / 2
	median := ref[mid].Offset
	if len(ref)%2 == 0 {
		median = ref[mid-1].Offset/2 + ref[mid].Offset/2
	}
	var uncertainty time.Duration
	for _, r := range ref {
		uncertainty = max(uncertainty, r.Uncertainty)
	}
	return abs(median)+uncertainty <= limit/2, median
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
