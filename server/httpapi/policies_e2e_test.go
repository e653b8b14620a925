package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/fsm"
)

// startPolicyNode is a live node at the cluster version that allows the
// newer policies.
func startPolicyNode(t *testing.T) (*liveNode, interface{ Advance(time.Duration) }) {
	t.Helper()
	clock := newManualClock()
	ln := startLiveNode(t, t.TempDir(), clock)
	require.Eventually(t, func() bool { return ln.node.ClusterVersion() >= fsm.ClusterVersionPolicies }, 10*time.Second, 5*time.Millisecond)
	return ln, clock
}

// A sliding window over HTTP: exact in its window, described in the
// answer and the draft's fields, and read back as it was written.
func TestSlidingWindowOverHTTP(t *testing.T) {
	ln, clock := startPolicyNode(t)
	ln.putPolicy(t, "/v1/tiers/minute", `{"algorithm":"sliding_window","limit":3,"window_seconds":60}`)
	ln.mustOK(t, "PUT", "/v1/clients/w/tier", `{"tier":"minute"}`)
	assert.Equal(t, api.Policy{Algorithm: "sliding_window", Limit: 3, WindowSeconds: 60, Mode: "enforce", WhenUnavailable: "deny"},
		ln.getTiers(t).Tiers["minute"])

	for i := range 3 {
		a := ln.allow(t, `{"client":"w"}`)
		require.True(t, a.Allowed, "request %d", i)
		clock.Advance(10 * time.Second)
	}
	r := ln.mustOK(t, "POST", "/v1/allow", `{"client":"w"}`)
	a := decodeStrict[api.AllowResponse](t, r.body)
	assert.False(t, a.Allowed, "3 in the last 30 s")
	assert.Equal(t, int64(60), a.WindowSeconds)
	assert.Equal(t, int64(3), a.Limit)
	assert.Empty(t, a.RefillPerSecond, "a window has no refill rate")
	assert.Equal(t, int64(30_000), a.RetryAfterMs, "the first admission leaves the window 60 s after it")
	assert.Equal(t, `"minute";q=3;w=60`, r.header.Get("RateLimit-Policy"))
	assert.Equal(t, "30", r.header.Get("Retry-After"))

	v := ln.getClient(t, "w")
	assert.Equal(t, "minute", v.Tier)
	assert.Zero(t, v.Remaining)
	clock.Advance(30 * time.Second)
	assert.True(t, ln.allow(t, `{"client":"w"}`).Allowed, "the first admission is 60 s old")
}

// Shadow mode answers every decision allowed and says what enforcing
// would have answered; the would-be denials are counted per tier.
func TestShadowModeOverHTTP(t *testing.T) {
	ln, _ := startPolicyNode(t)
	ln.putPolicy(t, "/v1/tiers/trial", `{"capacity":2,"refill_per_second":0,"mode":"shadow"}`)
	ln.mustOK(t, "PUT", "/v1/clients/s/tier", `{"tier":"trial"}`)
	var would []bool
	for range 3 {
		r := ln.mustOK(t, "POST", "/v1/allow?status=429", `{"client":"s"}`)
		a := decodeStrict[api.AllowResponse](t, r.body)
		require.True(t, a.Allowed)
		require.True(t, a.Shadow)
		require.NotNil(t, a.WouldAllow)
		would = append(would, *a.WouldAllow)
		assert.Empty(t, r.header.Get("Retry-After"), "an allowed answer carries no Retry-After")
	}
	assert.Equal(t, []bool{true, true, false}, would)
	assert.Zero(t, ln.getClient(t, "s").Remaining, "the decisions took what enforcing would have")
	metrics := string(ln.mustOK(t, "GET", "/metrics", "").body)
	assert.Contains(t, metrics, `quorate_decisions_total{outcome="shadow_denied",tier="trial"} 1`)
	assert.Contains(t, metrics, `quorate_decisions_total{outcome="allowed",tier="trial"} 2`)
}

// on_raise fill refills the tier's clients once; the same PUT again fills
// nothing; keep (the default) never fills.
func TestFillOnRaiseOverHTTP(t *testing.T) {
	ln, _ := startPolicyNode(t)
	ln.putPolicy(t, "/v1/tiers/pro", `{"capacity":10,"refill_per_second":0}`)
	ln.mustOK(t, "PUT", "/v1/clients/p/tier", `{"tier":"pro"}`)
	require.True(t, ln.allow(t, `{"client":"p","cost":10}`).Allowed)

	ln.putPolicy(t, "/v1/tiers/pro", `{"capacity":20,"refill_per_second":0}`)
	assert.Zero(t, ln.getClient(t, "p").Remaining, "keep: a raise gifts nothing")
	ln.putPolicy(t, "/v1/tiers/pro", `{"capacity":30,"refill_per_second":0,"on_raise":"fill"}`)
	assert.Equal(t, int64(30), ln.getClient(t, "p").Remaining, "fill: full at the new capacity")
	require.True(t, ln.allow(t, `{"client":"p","cost":25}`).Allowed)
	ln.putPolicy(t, "/v1/tiers/pro", `{"capacity":30,"refill_per_second":0,"on_raise":"fill"}`)
	assert.Equal(t, int64(5), ln.getClient(t, "p").Remaining, "the same PUT again (a retry) fills nothing")
}

// Bad policies are refused with invalid_policy and change nothing.
func TestBadPoliciesChangeNothing(t *testing.T) {
	ln, _ := startPolicyNode(t)
	before := ln.getTiers(t)
	for _, body := range []string{
		`{"algorithm":"leaky_bucket","capacity":5,"refill_per_second":1}`,
		`{"algorithm":"sliding_window","limit":10001,"window_seconds":60}`,
		`{"algorithm":"sliding_window","limit":5,"window_seconds":0.5}`,
		`{"algorithm":"sliding_window","limit":5}`,
		`{"algorithm":"sliding_window","capacity":5,"window_seconds":60}`,
		`{"capacity":5,"refill_per_second":1,"window_seconds":60}`,
		`{"capacity":5,"refill_per_second":1,"mode":"dry_run"}`,
		`{"capacity":5,"refill_per_second":1,"when_unavailable":"open"}`,
		`{"capacity":5,"refill_per_second":1,"on_raise":"double"}`,
		`{"capacity":5,"refill_per_second":1,"mode":1}`,
	} {
		r := ln.send(t, "PUT", "/v1/tiers/x", body)
		assert.Equal(t, http.StatusBadRequest, r.status, body)
		assert.True(t, strings.Contains(string(r.body), `"invalid_policy"`), "%s: %s", body, r.body)
	}
	assert.Equal(t, before, ln.getTiers(t))
}
