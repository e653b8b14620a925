package httpapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
)

// When the client's group cannot decide, a tier with when_unavailable
// allow is answered allowed and degraded, counted; a tier that denies
// gets the 503, and so does a batch holding any request of it. Errors
// that are not about deciding in time are never degraded.
func TestWhenUnavailable(t *testing.T) {
	var fail error
	svc := &fakeService{
		allow: func(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) { return nil, fail },
		policyOf: func(client string) (string, bucket.Policy) {
			if client == "open" {
				return "public", bucket.Policy{Capacity: 50, Rate: bucket.Scale, WhenUnavailable: bucket.AllowDegraded}
			}
			return bucket.DefaultTierName, bucket.BuiltinDefault
		},
	}
	ts := newTestServer(t, svc, Options{})

	for _, err := range []error{cluster.ErrUnavailable, cluster.ErrOutcomeUnknown, context.DeadlineExceeded} {
		fail = err
		r := ts.send(t, "POST", "/v1/allow", `{"client":"open"}`)
		require.Equal(t, http.StatusOK, r.status, "%v: %s", err, r.body)
		var a api.AllowResponse
		decodeJSON(t, r.body, &a)
		assert.Equal(t, api.AllowResponse{Allowed: true, Degraded: true, Limit: 50, Tier: "public", RefillPerSecond: "1", StampUnixNano: a.StampUnixNano}, a, "%v", err)
		assert.Empty(t, r.header.Get("RateLimit-Remaining"), "a degraded answer knows nothing of the bucket")

		assert.Equal(t, http.StatusServiceUnavailable, ts.send(t, "POST", "/v1/allow", `{"client":"closed"}`).status, "%v: deny", err)
	}
	fail = cluster.ErrUnavailable
	assert.Equal(t, http.StatusOK, ts.send(t, "POST", "/v1/allow/batch", `{"requests":[{"client":"open"},{"client":"open","cost":2}]}`).status)
	assert.Equal(t, http.StatusServiceUnavailable, ts.send(t, "POST", "/v1/allow/batch", `{"requests":[{"client":"open"},{"client":"closed"}]}`).status)

	fail = cluster.ErrOverloaded // this node's own load: another node may decide
	assert.Equal(t, http.StatusServiceUnavailable, ts.send(t, "POST", "/v1/allow", `{"client":"open"}`).status)

	metrics := string(ts.send(t, "GET", "/metrics", "").body)
	assert.Contains(t, metrics, `quorate_decisions_total{outcome="degraded",tier="public"} 5`)
}
