package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Judge enforces Δ pairwise: every node in bounds is within half of
// the limit of one median, so any two are within the limit of each other.
func TestJudge(t *testing.T) {
	const ms = time.Millisecond
	limit := 500 * ms
	in := func(offset time.Duration) Reading { return Reading{Offset: offset, InBounds: true} }
	out := func(offset time.Duration) Reading { return Reading{Offset: offset} }
	for _, c := range []struct {
		name       string
		readings   []Reading
		was        bool
		wantIn     bool
		wantOffset time.Duration
	}{
		// Clocks at -450, 0 and +450 ms, everyone in bounds before: the
		// outer two are 900 ms apart, so only the middle one stays.
		{"-450 of -450/0/+450", []Reading{in(450 * ms), in(900 * ms)}, true, false, 450 * ms},
		{"0 of -450/0/+450", []Reading{in(-450 * ms), in(450 * ms)}, true, true, 0},
		{"+450 of -450/0/+450", []Reading{in(-900 * ms), in(-450 * ms)}, true, false, -450 * ms},
		// A cluster starting together: nobody is in bounds yet, every clock counts.
		{"start: -450 of -450/0/+450", []Reading{out(450 * ms), out(900 * ms)}, false, false, 450 * ms},
		{"start: 0 of -450/0/+450", []Reading{out(-450 * ms), out(450 * ms)}, false, true, 0},
		// A newcomer is judged against the nodes in bounds, without its own clock.
		{"newcomer 10 min ahead of one good node", []Reading{in(-10 * time.Minute)}, false, false, -10 * time.Minute},
		{"newcomer 200 ms ahead of two good nodes", []Reading{in(-200 * ms), in(-200 * ms)}, false, true, -200 * ms},
		// ... and does not move the median of a node in bounds.
		{"good node, newcomer 10 min ahead", []Reading{out(10 * time.Minute)}, true, true, 0},
		// Two nodes 600 ms apart: neither can tell who is right.
		{"two nodes 600 ms apart", []Reading{in(600 * ms)}, true, false, 300 * ms},
		{"two nodes 400 ms apart", []Reading{in(400 * ms)}, true, true, 200 * ms},
		// The uncertainty of the readings counts against the node.
		{"240 ms plus 20 ms of round trip", []Reading{{Offset: 240 * ms, Uncertainty: 20 * ms, InBounds: true}, in(240 * ms)}, false, false, 240 * ms},
		{"a node that was off, now agreeing", []Reading{in(10 * ms), in(-10 * ms)}, false, true, 0},
	} {
		gotIn, gotOffset := Judge(c.readings, c.was, limit)
		assert.Equal(t, c.wantIn, gotIn, "%s: in bounds", c.name)
		assert.Equal(t, c.wantOffset, gotOffset, "%s: offset of the reference", c.name)
	}
}
