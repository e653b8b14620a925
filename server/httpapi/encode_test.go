package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/server/answer"
)

// The decision path appends its answers; they must be the bytes
// encoding/json wrote before, with the same headers.
func TestAnswersAreEncodingJSON(t *testing.T) {
	ds := []fsm.Decision{
		{Decision: bucket.Decision{Allowed: true, Remaining: 4*bucket.Scale + 1, Limit: 5, ResetAfter: 1500 * int64(time.Millisecond)}, Tier: "free", Stamp: t0, Rate: bucket.Scale, RateKnown: true},
		{Decision: bucket.Decision{Limit: 5, RetryAfter: 1, ResetAfter: bucket.Never}, Tier: "<odd&tier>", Stamp: t0 + 1, Duplicate: true, RateKnown: true},
		{Decision: bucket.Decision{Limit: 1, RetryAfter: bucket.Never, ResetAfter: bucket.Never}, Tier: bucket.DefaultTierName, Stamp: t0 + 2},
		{Decision: bucket.Decision{Allowed: true, Limit: 9}, Tier: "free", Stamp: t0 + 3, MaybeDuplicate: true, Rate: bucket.Scale / 4, RateKnown: true},
	}
	var decided []fsm.Decision
	svc := &fakeService{allow: func(context.Context, []fsm.AllowRequest) ([]fsm.Decision, error) { return decided, nil }}
	s := New(svc, Options{Registerer: prometheus.NewRegistry()})
	serve := func(path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		s.ServeHTTP(rec, r)
		return rec
	}

	for _, tt := range []struct {
		d                                 fsm.Decision
		path                              string
		status                            int
		limit, remaining, reset, retryAft string
		refill, policy, rateLimit         string
	}{
		{ds[0], "/v1/allow", 200, "5", "4", "2", "", "1", `"free";q=5;w=5`, `"free";r=4;t=2`},
		{ds[1], "/v1/allow?status=429", 429, "5", "0", "", "1", "0", `"<odd&tier>";q=5`, `"<odd&tier>";r=0`},
		{ds[2], "/v1/allow", 200, "1", "0", "", "", "", `"default";q=1`, `"default";r=0`},
		{ds[3], "/v1/allow", 200, "9", "0", "0", "", "0.25", `"free";q=9;w=36`, `"free";r=0;t=0`},
	} {
		decided = []fsm.Decision{tt.d}
		rec := serve(tt.path, `{"client":"a"}`)
		require.Equal(t, tt.status, rec.Code, rec.Body.String())
		out := answer.Of(tt.d, &s.rates)
		assert.Equal(t, json.Number(tt.refill), out.RefillPerSecond)
		assert.Equal(t, encodingJSON(t, out), rec.Body.String())
		h := rec.Header()
		assert.Equal(t, http.Header{
			"Content-Type":        {"application/json"},
			"Cache-Control":       {"no-store"},
			"Ratelimit-Limit":     {tt.limit},
			"Ratelimit-Remaining": {tt.remaining},
			"Ratelimit-Policy":    {tt.policy},
			"Ratelimit":           {tt.rateLimit},
		}, keep(h, "Content-Type", "Cache-Control", "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Policy", "Ratelimit"))
		assert.Equal(t, tt.reset, h.Get("RateLimit-Reset"))
		assert.Equal(t, tt.retryAft, h.Get("Retry-After"))
	}

	decided = ds
	rec := serve("/v1/allow/batch", `{"requests":[{"client":"a"},{"client":"b"},{"client":"c"},{"client":"d"}]}`)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	want := api.BatchResponse{}
	for _, d := range ds {
		want.Results = append(want.Results, answer.Of(d, &s.rates))
	}
	assert.Equal(t, encodingJSON(t, want), rec.Body.String())
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))

	svc.allow = func(context.Context, []fsm.AllowRequest) ([]fsm.Decision, error) { return nil, cluster.ErrUnavailable }
	rec = serve("/v1/allow", `{"client":"a"}`)
	require.Equal(t, 503, rec.Code)
	e := s.mapError(httptest.NewRequest("GET", "/", nil), cluster.ErrUnavailable)
	assert.Equal(t, encodingJSON(t, api.ErrorBody{Error: api.ErrorDetail{Code: e.code, Message: e.msg}}), rec.Body.String())
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
}

// keep returns the entries of h under keys.
func keep(h http.Header, keys ...string) http.Header {
	out := http.Header{}
	for _, k := range keys {
		if v, ok := h[k]; ok {
			out[k] = v
		}
	}
	return out
}

// Answers encoded into recycled buffers must not bleed into one another.
func TestAnswersConcurrent(t *testing.T) {
	svc := &fakeService{allow: func(_ context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
		ds := make([]fsm.Decision, len(reqs))
		for i, r := range reqs {
			ds[i] = fsm.Decision{Decision: bucket.Decision{Allowed: true, Limit: r.Cost}, Tier: r.Client}
		}
		return ds, nil
	}}
	s := New(svc, Options{Registerer: prometheus.NewRegistry()})
	const workers, rounds = 4, 200
	tiers := make([]string, workers)
	var wants [workers][9]string // by worker and cost-1
	for w := range workers {
		tiers[w] = strings.Repeat(string(rune('a'+w)), 10*(w+1))
		for c := range 9 {
			wants[w][c] = encodingJSON(t, api.BatchResponse{Results: []api.AllowResponse{{Allowed: true, Limit: int64(c + 1), Tier: tiers[w]}}})
		}
	}
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range rounds {
				rec := httptest.NewRecorder()
				body := fmt.Sprintf(`{"requests":[{"client":%q,"cost":%d}]}`, tiers[w], i%9+1)
				s.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/allow/batch", strings.NewReader(body)))
				if !assert.Equal(t, wants[w][i%9], rec.Body.String()) {
					return
				}
			}
		}()
	}
	for range workers {
		<-done
	}
}
