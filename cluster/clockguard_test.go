package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/fsm"
)

// A node whose clock is far ahead of its peers' stops stamping decisions:
// it hands its groups' leadership over, is not ready, and decisions sent to
// it are decided by the others. When its clock agrees again, it leads again.
func TestNodeWithAClockOffStopsLeading(t *testing.T) {
	base := NewManualClock()
	skewed := NewOffsetClock(base)
	tc := &testCluster{t: t, clock: base, clocks: map[int]Clock{0: skewed}, groups: 6, partition: &Partition{}, deadAfter: time.Hour}
	for range 3 {
		tc.addNode()
	}
	tc.waitStable(3)
	n1 := tc.nodes[0]
	for _, n := range tc.nodes {
		n.checkClocks()
		require.False(t, n.clockOff.Load(), "clocks agree")
	}

	skewed.SetOffset(2 * time.Second)
	for _, n := range tc.nodes {
		n.checkClocks()
	}
	require.True(t, n1.clockOff.Load(), "n1 is 2 s ahead of both peers")
	assert.False(t, tc.nodes[1].clockOff.Load(), "n2 disagrees with one peer of two: not off")
	assert.ErrorIs(t, n1.Ready(ctx(t)), errClockOff)
	require.Eventually(t, func() bool {
		for _, g := range n1.allGroups() {
			if g.Serving() {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "n1 kept leading groups")

	// Decisions sent to n1 are decided by the others, stamped with their clocks.
	ds, err := n1.Allow(ctx(t), []fsm.AllowRequest{{Client: "ivy", Cost: 1}, {Client: "jon", Cost: 1}, {Client: "kim", Cost: 1}})
	require.NoError(t, err)
	for _, d := range ds {
		assert.True(t, d.Allowed)
		assert.Less(t, d.Stamp, skewed.Now().UnixNano(), "no decision was stamped with n1's clock")
	}

	skewed.SetOffset(0)
	n1.checkClocks()
	assert.False(t, n1.clockOff.Load())
	require.Eventually(t, func() bool {
		for _, g := range n1.allGroups() {
			if g.Serving() {
				return true
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond, "n1 never led again")
}
