package answer

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
)

// Past maxCachedDecisionKeys, decisions are still counted, just not cached.
func TestDecisionCounterCacheBound(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := NewDecisions(reg)
	const tiers = maxCachedDecisionKeys + 10
	var ds []api.AllowResponse
	for i := range tiers {
		tier := fmt.Sprintf("t%d", i)
		ds = append(ds, api.AllowResponse{Tier: tier}, api.AllowResponse{Tier: tier}, api.AllowResponse{Tier: tier, Allowed: true})
	}
	d.Observe(ds)
	d.Observe(ds)
	assert.Len(t, *d.cache.Load(), maxCachedDecisionKeys)
	assert.Equal(t, 4.0, value(t, d.vec.WithLabelValues("denied", "t1030")))
	assert.Equal(t, 2.0, value(t, d.vec.WithLabelValues("allowed", "t0")))
}

// Two APIs of one node share the vector: NewDecisions on the same registry
// counts into the same series.
func TestDecisionsShareTheRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	http, grpc := NewDecisions(reg), NewDecisions(reg)
	http.Observe([]api.AllowResponse{{Tier: "free", Allowed: true}})
	grpc.Observe([]api.AllowResponse{{Tier: "free", Allowed: true}, {Tier: "free", Degraded: true, Allowed: true}})
	assert.Equal(t, 2.0, value(t, http.Vec().WithLabelValues("allowed", "free")))
	assert.Equal(t, 1.0, value(t, grpc.Vec().WithLabelValues("degraded", "free")))
}

func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}
