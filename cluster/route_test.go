package cluster

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every node names every group's leader by its HTTP address, and the table
// moves, with a higher version, when a leader goes.
func TestRoutesNameEachGroupsLeader(t *testing.T) {
	tc := newTestCluster(t, 3)
	want := func() map[int]string {
		out := map[int]string{}
		for i, n := range tc.nodes {
			if n == nil {
				continue
			}
			for _, g := range n.groups {
				if g.Serving() {
					out[g.Index] = tc.httpAddr(i)
				}
			}
		}
		return out
	}
	// Every node's routes name the leaders once each has heard of them
	// (a node learns a leader it is not from raft's observations, so a
	// moment after the cluster settles one may still be behind).
	var version uint64
	require.Eventually(t, func() bool {
		leaders := want()
		if len(leaders) != tc.groups {
			return false
		}
		version = 0
		for _, n := range tc.nodes {
			rt := n.Routes()
			if rt.Groups != tc.groups || !maps.Equal(leaders, rt.Leaders) {
				return false
			}
			version = max(version, rt.Version)
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the nodes' routes never all named every group's leader")

	victim := tc.leaderOfClient("anyone")
	moved := GroupOf("anyone", tc.groups)
	tc.stop(victim)
	survivor := tc.live()[0]
	require.Eventually(t, func() bool {
		rt := survivor.Routes()
		addr, ok := rt.Leaders[moved]
		return ok && addr != tc.httpAddr(victim) && rt.Version > version
	}, 10*time.Second, 10*time.Millisecond, "the routes never moved off the stopped leader")
}
