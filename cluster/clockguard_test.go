package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/fsm"
)

// A node whose clock is far ahead of its peers' stops stamping decisions:
// it hands its groups' leadership over, is not ready, and decisions sent to
// it are decided by the others. When its clock agrees again, it leads again.
func TestNodeWithAClockOffStopsLeading(t *testing.T) {
	base := clock.NewManual()
	skewed := clock.NewOffset(base)
	tc := &testCluster{t: t, clock: base, clocks: map[int]clock.Clock{0: skewed}, groups: 6, partition: &Partition{}, deadAfter: time.Hour}
	for range 3 {
		tc.addNode()
	}
	tc.waitStable(3)
	n1 := tc.nodes[0]
	for _, n := range tc.nodes {
		n.clockGuard.Check()
		require.False(t, (n.clockGuard.State() != clock.InBounds), "clocks agree")
	}

	skewed.SetOffset(2 * time.Second)
	for _, n := range tc.nodes {
		n.clockGuard.Check()
	}
	require.True(t, (n1.clockGuard.State() != clock.InBounds), "n1 is 2 s ahead of both peers")
	assert.False(t, (tc.nodes[1].clockGuard.State() != clock.InBounds), "n2 disagrees with one peer of two: not off")
	assert.ErrorIs(t, n1.Ready(ctx(t)), clock.ErrOff)
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
	n1.clockGuard.Check()
	assert.False(t, (n1.clockGuard.State() != clock.InBounds))
	require.Eventually(t, func() bool {
		for _, g := range n1.allGroups() {
			if g.Serving() {
				return true
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond, "n1 never led again")
}

// A node restarted with its clock far ahead (before NTP synced, say) must
// stamp nothing before its clock has been compared with its peers': not a
// decision, not a reclaim. Even leading the group of a drained bucket, it
// refills nothing, and the group's time does not jump.
func TestNodeRestartedWithAClockAheadStampsNothing(t *testing.T) {
	base := clock.NewManual()
	skewed := clock.NewOffset(base)
	tc := &testCluster{t: t, clock: base, clocks: map[int]clock.Clock{2: skewed}, groups: 3, partition: &Partition{}, deadAfter: time.Hour}
	for range 3 {
		tc.addNode()
	}
	tc.waitStable(3)
	_, err := tc.nodes[0].ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "slow",
		Policy: bucket.Policy{Capacity: 10, Rate: bucket.Scale / 10}})
	require.NoError(t, err)
	require.NoError(t, tc.nodes[0].SetClientTier(ctx(t), "drained", "slow", "ops"))
	require.True(t, allowOne(t, tc.nodes[0], "drained", 10).Allowed)
	require.False(t, allowOne(t, tc.nodes[0], "drained", 1).Allowed)

	tc.stop(2)
	skewed.SetOffset(10 * time.Minute)
	tc.start(2)
	n3 := tc.nodes[2]
	gi := GroupOf("drained", tc.groups)
	g3 := n3.groups[gi]

	// Hand the drained client's group to n3 as soon as it has caught up.
	require.Eventually(t, func() bool {
		l := tc.leaderOfClient("drained")
		if l < 0 || l == 2 {
			return l == 2
		}
		lg := tc.nodes[l].groups[gi]
		if g3.FSM.AppliedIndex() < lg.FSM.AppliedIndex() {
			return false
		}
		_ = lg.Raft.LeadershipTransferToServer(raft.ServerID("n3"), raft.ServerAddress(tc.raft[2])).Error()
		return g3.Raft.State() == raft.Leader
	}, 20*time.Second, 5*time.Millisecond, "n3 never led the drained client's group")
	require.Eventually(t, func() bool { return g3.Serving() || g3.Raft.State() != raft.Leader }, 10*time.Second, time.Millisecond)

	n3.reclaim()
	// The decision is made, by a node whose clock is in bounds: n3 hands
	// the group over rather than stamp it.
	d := allowOne(t, n3, "drained", 1)
	assert.False(t, d.Allowed, "a drained bucket refilled by a clock 10 minutes ahead")
	assert.Less(t, d.Stamp, base.Now().Add(time.Minute).UnixNano(), "a decision was stamped with n3's clock")
	assert.ErrorIs(t, n3.Ready(ctx(t)), clock.ErrOff, "n3's clock is not in bounds: it is not ready")

	// Whoever decides next, group time has not jumped: still drained.
	d = allowOne(t, tc.nodes[0], "drained", 1)
	assert.False(t, d.Allowed, "the bucket refilled")
	assert.Less(t, d.Stamp, base.Now().Add(time.Minute).UnixNano(), "group time jumped ahead")
}

// Clocks that move to -450, 0 and +450 ms: the old guard kept all three
// leading (each agreed with one peer of two), so a leadership move from the
// first to the last credited 900 ms of refill. Now the nodes that stamp are
// within 500 ms of each other, and the middle one is among them.
func TestClockGuardEnforcesTheBoundPairwise(t *testing.T) {
	base := clock.NewManual()
	offsets := []time.Duration{-450 * time.Millisecond, 0, 450 * time.Millisecond}
	clocks := map[int]clock.Clock{}
	for i := range offsets {
		clocks[i] = clock.NewOffset(base)
	}
	tc := &testCluster{t: t, clock: base, clocks: clocks, groups: 2, partition: &Partition{}, deadAfter: time.Hour}
	for range offsets {
		tc.addNode()
	}
	tc.waitStable(3)
	for i, off := range offsets {
		clocks[i].(*clock.Offset).SetOffset(off)
	}
	inBounds := func() (in []int) {
		for i, n := range tc.nodes {
			if n.clockGuard.State() == clock.InBounds {
				in = append(in, i)
			}
		}
		return in
	}
	require.Eventually(t, func() bool {
		for _, n := range tc.nodes {
			n.clockGuard.Check()
		}
		in := inBounds()
		return !slices.Contains(in, 0) || !slices.Contains(in, 2)
	}, 20*time.Second, 10*time.Millisecond, "n1 and n3, 900 ms apart, both stayed in bounds")
	in := inBounds()
	assert.Contains(t, in, 1, "n2, the median clock, is in bounds")
	for _, i := range in {
		for _, j := range in {
			assert.LessOrEqual(t, offsets[i]-offsets[j], DefaultMaxClockOffset, "n%d and n%d both stamp", i+1, j+1)
		}
	}

	// Every decision is stamped by a clock in bounds, whichever node it reaches.
	var stamps []int64
	for _, i := range in {
		stamps = append(stamps, base.Now().Add(offsets[i]).UnixNano())
	}
	for i, n := range tc.nodes {
		d := allowOne(t, n, fmt.Sprintf("c%d", i), 1)
		assert.Contains(t, stamps, d.Stamp, "decision through n%d stamped by a clock out of bounds", i+1)
	}
}
