package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
)

// Every single-decision answer carries its policy's rate in the body and
// the draft's structured fields beside today's trio, computed from the
// decision the FSM made: a window of capacity/rate seconds rounded up,
// none for a bucket that never refills.
func TestAllowAnswersCarryTheDraftFields(t *testing.T) {
	svc, clk := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	for tier, body := range map[string]string{
		"free":   `{"capacity": 5, "refill_per_second": 1}`,
		"frozen": `{"capacity": 2, "refill_per_second": 0}`,
		"third":  `{"capacity": 10, "refill_per_second": 3}`,
		"slow":   `{"capacity": 1, "refill_per_second": 0.5}`,
	} {
		require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/tiers/"+tier, body).status)
	}
	for client, tier := range map[string]string{"alice": "free", "ice": "frozen", "tri": "third", "sid": "slow"} {
		require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/clients/"+client+"/tier", fmt.Sprintf(`{"tier":%q}`, tier)).status)
	}
	for i, st := range []struct {
		advance           time.Duration
		client            string
		cost              int64
		refill            string
		policy, rateLimit string
		retryAfter        string
	}{
		{0, "alice", 1, "1", `"free";q=5;w=5`, `"free";r=4;t=1`, ""},
		{0, "alice", 4, "1", `"free";q=5;w=5`, `"free";r=0;t=5`, ""},
		{0, "alice", 1, "1", `"free";q=5;w=5`, `"free";r=0;t=5`, "1"},
		{1500 * time.Millisecond, "alice", 0, "1", `"free";q=5;w=5`, `"free";r=1;t=4`, ""},
		{0, "ice", 2, "0", `"frozen";q=2`, `"frozen";r=0`, ""},
		{0, "ice", 1, "0", `"frozen";q=2`, `"frozen";r=0`, ""},
		{0, "tri", 10, "3", `"third";q=10;w=4`, `"third";r=0;t=4`, ""},
		{0, "sid", 1, "0.5", `"slow";q=1;w=2`, `"slow";r=0;t=2`, ""},
		{0, "bob", 1, "1", `"default";q=10;w=10`, `"default";r=9;t=1`, ""},
	} {
		clk.advance(st.advance)
		a := ts.send(t, "POST", "/v1/allow", fmt.Sprintf(`{"client":%q,"cost":%d}`, st.client, st.cost))
		require.Equal(t, http.StatusOK, a.status, "step %d: %s", i, a.body)
		var got api.AllowResponse
		decodeJSON(t, a.body, &got)
		desc := fmt.Sprintf("step %d: allow(%s, cost %d)", i, st.client, st.cost)
		assert.Equal(t, json.Number(st.refill), got.RefillPerSecond, "%s: refill_per_second", desc)
		assert.Equal(t, st.policy, a.header.Get("RateLimit-Policy"), "%s: RateLimit-Policy", desc)
		assert.Equal(t, st.rateLimit, a.header.Get("RateLimit"), "%s: RateLimit", desc)
		assert.Equal(t, st.retryAfter, a.header.Get("Retry-After"), "%s: Retry-After", desc)
		assert.False(t, got.Degraded, "%s: the server never answers degraded", desc)
		want := http.Header{}
		got.SetHeaders(want)
		for k := range want {
			assert.Equal(t, want[k], a.header[k], "%s: %s is what the body's fields give", desc, k)
		}
	}
}

// A decision that does not know its rate (forwarded in a cluster still at
// cluster version 1) has no refill_per_second and no window; the rest is
// as usual.
func TestAllowAnswerWithoutARate(t *testing.T) {
	d := fsm.Decision{Decision: bucket.Decision{Allowed: true, Remaining: 2 * bucket.Scale, Limit: 3, ResetAfter: int64(time.Second)}, Tier: "free", Stamp: t0}
	svc := &fakeService{allow: func(_ context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
		return []fsm.Decision{d}, nil
	}}
	ts := newTestServer(t, svc, Options{})
	a := ts.send(t, "POST", "/v1/allow", `{"client":"a"}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.NotContains(t, string(a.body), "refill_per_second")
	assert.Equal(t, `"free";q=3`, a.header.Get("RateLimit-Policy"))
	assert.Equal(t, `"free";r=2;t=1`, a.header.Get("RateLimit"))
}

// Both decision routes carry the node's routes version, the number GET
// /v1/routes answers, and follow it when it rises.
func TestDecisionAnswersCarryTheRoutesVersion(t *testing.T) {
	fsmSvc, _ := newFSMService(t)
	var version atomic.Uint64
	versioned := &versionedService{fakeService: fakeService{allow: fsmSvc.allow}, version: &version}
	for name, svc := range map[string]Service{"versioned": versioned} {
		ts := newTestServer(t, svc, Options{})
		check := func(want string) {
			t.Helper()
			a := ts.send(t, "POST", "/v1/allow", `{"client":"a"}`)
			require.Equal(t, http.StatusOK, a.status, "%s", a.body)
			assert.Equal(t, want, a.header.Get(api.HeaderRoutesVersion), "%s: POST /v1/allow", name)
			a = ts.send(t, "POST", "/v1/allow/batch", `{"requests":[{"client":"a"},{"client":"b"}]}`)
			require.Equal(t, http.StatusOK, a.status, "%s", a.body)
			assert.Equal(t, want, a.header.Get(api.HeaderRoutesVersion), "%s: POST /v1/allow/batch", name)
			var rt api.RoutesResponse
			decodeJSON(t, ts.send(t, "GET", "/v1/routes", "").body, &rt)
			assert.Equal(t, want, fmt.Sprint(rt.Version), "%s: GET /v1/routes", name)
		}
		version.Store(7)
		check("7")
		version.Store(9) // a leadership change
		check("9")
	}
}

// Answers written at once while the routes version moves each carry one
// version the node had, whole.
func TestRoutesVersionHeaderUnderConcurrency(t *testing.T) {
	var version atomic.Uint64
	svc := &versionedService{fakeService: fakeService{allow: func(_ context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
		return make([]fsm.Decision, len(reqs)), nil
	}}, version: &version}
	s := New(svc, Options{Registerer: prometheus.NewRegistry()})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				if w == 0 {
					version.Add(1)
				}
				rec := httptest.NewRecorder()
				r := httptest.NewRequest("POST", "/v1/allow/batch", strings.NewReader(`{"requests":[{"client":"a"}]}`))
				s.ServeHTTP(rec, r)
				v, err := strconv.ParseUint(rec.Header().Get(api.HeaderRoutesVersion), 10, 64)
				if !assert.NoError(t, err, "answer %d", i) || !assert.LessOrEqual(t, v, version.Load()) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// versionedService is a fakeService whose routes version moves under the
// test's control, concurrently with the answers.
type versionedService struct {
	fakeService
	version *atomic.Uint64
}

func (s *versionedService) RoutesVersion() uint64 { return s.version.Load() }

func (s *versionedService) Routes() cluster.Routes {
	return cluster.Routes{Groups: 1, Version: s.version.Load()}
}
