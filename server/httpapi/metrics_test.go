package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
)

func TestMetricsEndpoint(t *testing.T) {
	svc, _ := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/tiers/free", `{"capacity":1,"refill_per_second":1}`).status)
	require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/clients/a/tier", `{"tier":"free"}`).status)
	ts.send(t, "POST", "/v1/allow", `{"client":"a","request_id":"r"}`)
	ts.send(t, "POST", "/v1/allow", `{"client":"a","request_id":"r"}`)
	ts.send(t, "POST", "/v1/allow", `{"client":"a"}`)
	ts.send(t, "POST", "/v1/allow/batch", `{"requests":[{"client":"b"},{"client":"c"},{"client":"d"}]}`)
	ts.send(t, "POST", "/v1/allow", `{"client":""}`)
	ts.send(t, "GET", "/nowhere", "")

	a := ts.send(t, "GET", "/metrics", "")
	require.Equal(t, http.StatusOK, a.status)
	text := string(a.body)
	for _, want := range []string{
		`quorate_decisions_total{outcome="allowed",tier="free"} 1`,
		`quorate_decisions_total{outcome="duplicate",tier="free"} 1`,
		`quorate_decisions_total{outcome="denied",tier="free"} 1`,
		`quorate_decisions_total{outcome="allowed",tier="default"} 3`,
		`quorate_http_requests_total{code="200",route="POST /v1/allow"} 3`,
		`quorate_http_requests_total{code="400",route="POST /v1/allow"} 1`,
		`quorate_http_requests_total{code="200",route="POST /v1/allow/batch"} 1`,
		`quorate_http_requests_total{code="404",route="unmatched"} 1`,
		`quorate_decision_duration_seconds_bucket{le="0.0001"}`,
		`quorate_decision_duration_seconds_bucket{le="5"}`,
		`quorate_decision_duration_seconds_count 4`,
		`quorate_batch_requests_bucket{le="2"} 0`,
		`quorate_batch_requests_bucket{le="5"} 1`,
		`quorate_batch_requests_count 1`,
	} {
		assert.Contains(t, text, want)
	}
}

func TestMetricsRegistries(t *testing.T) {
	svc, _ := newFSMService(t)

	// No Registerer: a private registry, served on /metrics, never the global one.
	ts := httptest.NewServer(New(svc, Options{}))
	defer ts.Close()
	resp, err := ts.Client().Post(ts.URL+"/v1/allow", "application/json", strings.NewReader(`{"client":"x"}`))
	require.NoError(t, err)
	resp.Body.Close()
	resp, err = ts.Client().Get(ts.URL + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Zero(t, counterValue(t, prometheus.DefaultGatherer, "quorate_decisions_total"), "metrics leaked into the default registry")

	// Two Servers on one registry share the collectors instead of panicking.
	reg := prometheus.NewRegistry()
	s1 := New(svc, Options{Registerer: reg})
	s2 := New(svc, Options{Registerer: reg})
	for _, s := range []*Server{s1, s2} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/allow", strings.NewReader(`{"client":"y"}`)))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}
	assert.Equal(t, 2.0, counterValue(t, reg, "quorate_decisions_total"))

	// A Registerer that cannot gather and no Gatherer: no /metrics route.
	s3 := New(svc, Options{Registerer: prometheus.WrapRegistererWithPrefix("", prometheus.NewRegistry())})
	rec := httptest.NewRecorder()
	s3.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code)
}

// counterValue sums the counter family name in g (0 if absent).
func counterValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// Cached and uncached status codes count the same, from many goroutines.
func TestRequestCounterConcurrent(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	c := m.requestCounter("POST /v1/allow")
	const workers, rounds = 4, 100
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for range rounds {
				c.observe(200)
				c.observe(418)
				m.decisions.Observe([]api.AllowResponse{{Tier: "free", Duplicate: true}})
			}
		}()
	}
	for range workers {
		<-done
	}
	assert.Equal(t, float64(workers*rounds), childValue(t, m.requests.WithLabelValues("POST /v1/allow", "200")))
	assert.Equal(t, float64(workers*rounds), childValue(t, m.requests.WithLabelValues("POST /v1/allow", "418")))
	assert.Equal(t, float64(workers*rounds), childValue(t, m.decisions.Vec().WithLabelValues("duplicate", "free")))
	assert.Equal(t, 2.0, counterValue(t, reg, "quorate_http_requests_total")/float64(workers*rounds), "only the two series")
}

// childValue is the value of one counter.
func childValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}
