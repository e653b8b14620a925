package httpapi

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorate/quorate/fsm"
)

// metrics are the API's Prometheus collectors.
//
//	quorate_decisions_total{outcome="allowed|denied|duplicate",tier}  counter
//	quorate_http_requests_total{route,code}                           counter
//	quorate_decision_duration_seconds                                 histogram, 100µs..5s
//	quorate_batch_requests                                            histogram of batch sizes
//
// The tier label takes the operator-defined tier names and "default". The
// route label is the route pattern ("POST /v1/allow"), "other PATH" for a
// method the path does not serve (405), or "unmatched" (404); code 499
// counts callers that went away before the answer.
type metrics struct {
	decisions *prometheus.CounterVec
	requests  *prometheus.CounterVec
	duration  prometheus.Histogram
	batch     prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quorate_decisions_total",
			Help: "Admission decisions answered, by outcome (allowed, denied, duplicate: a request id seen before) and tier.",
		}, []string{"outcome", "tier"}),
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
	m.decisions = register(reg, m.decisions)
	m.requests = register(reg, m.requests)
	m.duration = register(reg, m.duration)
	m.batch = register(reg, m.batch)
	return m
}

// register registers c on reg and returns it, or returns the identical
// collector already registered (so several Servers may share a registry).
// Any other registration failure is a programming error and panics, like
// prometheus.MustRegister.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("httpapi: registering metrics: %v", err))
}

func (m *metrics) observeDecisions(ds []fsm.Decision) {
	for _, d := range ds {
		outcome := "denied"
		switch {
		case d.Duplicate:
			outcome = "duplicate"
		case d.Allowed:
			outcome = "allowed"
		}
		m.decisions.WithLabelValues(outcome, d.Tier).Inc()
	}
}

func (m *metrics) observeRequest(route string, code int) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
}
