//go:build unsafe_decide

package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// TestUnsafeBuildOverAdmits shows that the negative control is unsafe: two
// nodes that decide on their own replicas admit a full bucket each.
func TestUnsafeBuildOverAdmits(t *testing.T) {
	tc := newTestCluster(t, 3)
	admitted := 0
	for _, n := range tc.nodes[:2] {
		for range int(bucket.BuiltinDefault.Capacity) {
			ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "hot", Cost: 1}})
			require.NoError(t, err)
			if ds[0].Allowed {
				admitted++
			}
		}
	}
	assert.Greater(t, admitted, int(bucket.BuiltinDefault.Capacity), "the unsafe build must over-admit")
}
