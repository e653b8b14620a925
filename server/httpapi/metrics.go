package httpapi

import (
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorate/quorate/server/answer"
)

// metrics are the API's Prometheus collectors.
//
//	quorate_decisions_total{outcome,tier}                              counter (answer.Decisions)
//	quorate_http_requests_total{route,code}                           counter
//	quorate_decision_duration_seconds                                 histogram, 100µs..5s
//	quorate_batch_requests                                            histogram of batch sizes
//
// The route label is the route pattern ("POST /v1/allow"), "other PATH" for a
// method the path does not serve (405), or "unmatched" (404); code 499
// counts callers that went away before the answer.
type metrics struct {
	decisions *answer.Decisions
	requests  *prometheus.CounterVec
	duration  prometheus.Histogram
	batch     prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: answer.NewDecisions(reg),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quorate_http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "quorate_decision_duration_seconds",
			Help:    "Time for the cluster to commit and apply an allow call (single or batch), failures included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "quorate_batch_requests",
			Help:    "Number of requests in each accepted POST /v1/allow/batch.",
			Buckets: []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000},
		}),
	}
	m.requests = answer.Register(reg, m.requests)
	m.duration = answer.Register(reg, m.duration)
	m.batch = answer.Register(reg, m.batch)
	return m
}

// requestCounter counts the answers of one route in
// quorate_http_requests_total, keeping the children of the status codes
// answers usually have so that counting one is an atomic add.
type requestCounter struct {
	vec   *prometheus.CounterVec
	route string
	// cached[i] is the child of cachedCodes[i], nil until first used (so a
	// series appears only once it counts something, as with WithLabelValues).
	cached [len(cachedCodes)]atomic.Pointer[counterRef]
}

// counterRef lets an atomic.Pointer hold a prometheus.Counter.
type counterRef struct{ prometheus.Counter }

var cachedCodes = [...]int{200, 202, 400, 404, 405, 413, 415, 429, statusClientClosedRequest, 500, 503}

// requestCounter returns the counter of route's answers.
func (m *metrics) requestCounter(route string) *requestCounter {
	return &requestCounter{vec: m.requests, route: route}
}

// observe counts one answer with status code.
func (c *requestCounter) observe(code int) {
	i := slices.Index(cachedCodes[:], code)
	if i < 0 {
		c.vec.WithLabelValues(c.route, strconv.Itoa(code)).Inc()
		return
	}
	ref := c.cached[i].Load()
	if ref == nil {
		// Racing callers store the same child: the vector hands out one per label set.
		ref = &counterRef{c.vec.WithLabelValues(c.route, strconv.Itoa(code))}
		c.cached[i].Store(ref)
	}
	ref.Inc()
}
