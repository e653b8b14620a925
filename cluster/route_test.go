package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
	first := want()
	require.Len(t, first, tc.groups)
	var version uint64
	for _, n := range tc.nodes {
		rt := n.Routes()
		assert.Equal(t, tc.groups, rt.Groups)
		assert.Equal(t, first, rt.Leaders)
		version = max(version, rt.Version)
	}

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
