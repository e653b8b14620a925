//go:build linux

package control

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// views returns what every node sees under g, as node -> sorted nodes.
func views(g Grudge, nodes []int) map[int][]int {
	out := map[int][]int{}
	for _, i := range nodes {
		out[i] = g.Sees(nodes, i)
	}
	return out
}

// assertSymmetric checks that whenever a drops b, b drops a.
func assertSymmetric(t *testing.T, g Grudge) {
	t.Helper()
	for a, bs := range g {
		for _, b := range bs {
			assert.Contains(t, g[b], a, "%s drops %s but not the other way", nodeID(a), nodeID(b))
		}
	}
}

func TestIsolate(t *testing.T) {
	g := Isolate([]int{1, 2, 3}, 2)
	assert.Equal(t, Grudge{1: {2}, 2: {1, 3}, 3: {2}}, g)
	assert.Equal(t, []string{"n1|n2", "n2|n3"}, g.Cuts())
	assert.Equal(t, map[int][]int{1: {1, 3}, 2: {2}, 3: {1, 3}}, views(g, []int{1, 2, 3}))
}

func TestHalves(t *testing.T) {
	tests := []struct {
		order []int
		want  [][]int
	}{
		{[]int{3, 1, 2}, [][]int{{3}, {1, 2}}},
		{[]int{5, 3, 1, 2, 4}, [][]int{{5, 3}, {1, 2, 4}}},
	}
	for _, tt := range tests {
		got := Halves(tt.order)
		assert.Equal(t, tt.want, got, "Halves(%v)", tt.order)
		g := Complete(got)
		assertSymmetric(t, g)
		nodes := slices.Sorted(slices.Values(tt.order))
		for _, comp := range got {
			for _, i := range comp {
				assert.ElementsMatch(t, comp, g.Sees(nodes, i), "Halves(%v): %s sees only its half", tt.order, nodeID(i))
			}
		}
	}
}

func TestRingFiveNodes(t *testing.T) {
	order := []int{3, 1, 4, 5, 2}
	g, err := Ring(order)
	require.NoError(t, err)
	assertSymmetric(t, g)
	nodes := []int{1, 2, 3, 4, 5}
	seen := map[string]int{}
	for p, i := range order {
		v := g.Sees(nodes, i)
		assert.Len(t, v, 3, "%s sees a majority of 5", nodeID(i))
		prev, next := order[(p+4)%5], order[(p+1)%5]
		assert.ElementsMatch(t, []int{prev, i, next}, v, "%s sees its ring neighbours", nodeID(i))
		seen[nodeList(v)]++
	}
	assert.Len(t, seen, 5, "no two nodes see the same majority: %v", seen)
	assert.Len(t, g.Cuts(), 5, "a 5-ring cuts 5 of the 10 links")
}

func TestRingNeedsAnOddMajority(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 6, 7} {
		order := make([]int, n)
		for k := range order {
			order[k] = k + 1
		}
		_, err := Ring(order)
		assert.Error(t, err, "Ring of %d nodes", n)
	}
}

func TestBridge(t *testing.T) {
	tests := []struct {
		order       []int
		left, right []int
		bridge      int
		cuts        []string
	}{
		{[]int{2, 3, 1}, []int{2}, []int{1}, 3, []string{"n1|n2"}},
		{[]int{4, 1, 5, 2, 3}, []int{4, 1}, []int{2, 3}, 5, []string{"n1|n2", "n1|n3", "n2|n4", "n3|n4"}},
	}
	for _, tt := range tests {
		g := Bridge(tt.order)
		assertSymmetric(t, g)
		nodes := slices.Sorted(slices.Values(tt.order))
		assert.Equal(t, nodes, g.Sees(nodes, tt.bridge), "Bridge(%v): the bridge sees everyone", tt.order)
		for _, i := range tt.left {
			assert.ElementsMatch(t, append(slices.Clone(tt.left), tt.bridge), g.Sees(nodes, i), "Bridge(%v): %s", tt.order, nodeID(i))
		}
		for _, i := range tt.right {
			assert.ElementsMatch(t, append(slices.Clone(tt.right), tt.bridge), g.Sees(nodes, i), "Bridge(%v): %s", tt.order, nodeID(i))
		}
		assert.Equal(t, tt.cuts, g.Cuts(), "Bridge(%v)", tt.order)
	}
}

func TestRestoreScript(t *testing.T) {
	c := testCluster(t, 3, true)
	g := Isolate([]int{1, 2, 3}, 1)
	assert.Equal(t, "*filter\n-F INPUT\n-F OUTPUT\n"+
		"-A INPUT -s 10.77.0.12/32 -j DROP\n-A OUTPUT -d 10.77.0.12/32 -j DROP\n"+
		"-A INPUT -s 10.77.0.13/32 -j DROP\n-A OUTPUT -d 10.77.0.13/32 -j DROP\n"+
		"COMMIT\n", c.restoreScript(g, 1))
	assert.Equal(t, "*filter\n-F INPUT\n-F OUTPUT\n"+
		"-A INPUT -s 10.77.0.11/32 -j DROP\n-A OUTPUT -d 10.77.0.11/32 -j DROP\n"+
		"COMMIT\n", c.restoreScript(g, 2))
	heal := c.restoreScript(nil, 3)
	assert.Equal(t, "*filter\n-F INPUT\n-F OUTPUT\nCOMMIT\n", heal)
	assert.False(t, strings.Contains(heal, "-A"))
}
