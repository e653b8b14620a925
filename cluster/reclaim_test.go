package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/clock"
)

// A leader keeps reclaiming a group after its last bucket has gone, until
// the decisions it remembers have gone too: memory of requests without an
// id expires by group time, and in an idle group only reclaims move it.
// Then the log caches go, and the node holds what a fresh one does.
func TestReclaimForgetsRememberedDecisionsOfIdleGroups(t *testing.T) {
	clk := clock.NewManual()
	n := startNode(t, t.TempDir(), clk, func(o *Options) { o.ReclaimInterval = 5 * time.Millisecond })
	for _, c := range []string{"a", "b", "c", "d", "e", "f"} {
		allowOne(t, n, c, 1)
	}
	remembered := func() (buckets, byOrigin int) {
		for _, g := range n.groups {
			b, _, _ := g.FSM.Stats()
			_, o := g.FSM.Remembered()
			buckets, byOrigin = buckets+b, byOrigin+o
		}
		return buckets, byOrigin
	}
	_, held := remembered()
	require.Equal(t, 6, held, "each decision is remembered under its origin")

	clk.Advance(2 * time.Second)
	require.Eventually(t, func() bool { b, _ := remembered(); return b == 0 }, 10*time.Second, time.Millisecond,
		"the buckets, full again, are reclaimed")
	_, held = remembered()
	assert.Equal(t, 6, held, "2 s on, the origins are remembered still")

	clk.Advance(9 * time.Second)
	assert.Eventually(t, func() bool { _, o := remembered(); return o == 0 }, 10*time.Second, time.Millisecond,
		"past their 10 s, reclaims of the now empty groups forget them")

	cached := func() (b int) {
		for _, g := range n.allGroups() {
			b += g.CacheBytes()
		}
		return b
	}
	assert.Eventually(t, func() bool { return cached() == 0 }, 10*time.Second, time.Millisecond,
		"once nothing more is stored, the groups let their log caches go")
}
