package httpapi

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorate/quorate/api"
)

// metrics are the API's Prometheus collectors.
//
//	quorate_decisions_total{outcome,tier}                              counter
//	  outcome: allowed, denied, duplicate (a request id seen before),
//	  shadow_denied (a tier in shadow mode would have denied; answered
//	  allowed), degraded (the group could not decide and the tier's
//	  when_unavailable is allow; answered allowed)
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

	// decisionCache holds the children of decisions seen so far; writers
	// hold decisionMu and replace the map (see decisionCounter).
	decisionCache atomic.Pointer[map[decisionKey]prometheus.Counter]
	decisionMu    sync.Mutex
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quorate_decisions_total",
			Help: "Admission decisions answered, by outcome (allowed, denied, duplicate: a request id seen before, shadow_denied: denied by a tier in shadow mode and answered allowed, degraded: answered allowed without a decision by a tier with when_unavailable allow) and tier.",
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
	m.decisionCache.Store(&map[decisionKey]prometheus.Counter{})
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

// observeAnswers counts answers in quorate_decisions_total.
func (m *metrics) observeAnswers(answers []api.AllowResponse) {
	var last decisionKey
	var c prometheus.Counter
	for i := range answers {
		a := &answers[i]
		k := decisionKey{outcome: outcomeDenied, tier: a.Tier}
		switch {
		case a.Duplicate:
			k.outcome = outcomeDuplicate
		case a.Degraded:
			k.outcome = outcomeDegraded
		case a.Shadow && !*a.WouldAllow:
			k.outcome = outcomeShadowDenied
		case a.Allowed:
			k.outcome = outcomeAllowed
		}
		if c == nil || k != last {
			c, last = m.decisionCounter(k), k
		}
		c.Inc()
	}
}

// Outcomes of a decision, the outcome label of quorate_decisions_total.
const (
	outcomeAllowed uint8 = iota
	outcomeDenied
	outcomeDuplicate
	outcomeShadowDenied
	outcomeDegraded
)

var outcomeLabels = [...]string{outcomeAllowed: "allowed", outcomeDenied: "denied", outcomeDuplicate: "duplicate",
	outcomeShadowDenied: "shadow_denied", outcomeDegraded: "degraded"}

// decisionKey names one child of quorate_decisions_total.
type decisionKey struct {
	outcome uint8
	tier    string
}

// maxCachedDecisionKeys bounds decisionCache: tiers are operator-defined
// and few, but nothing stops a config from churning through names.
const maxCachedDecisionKeys = 1024

// decisionCounter returns the child of quorate_decisions_total for k. The
// children already seen are kept in a map that is replaced, never changed,
// so finding one takes no lock and no hashing of label values. (Nothing
// deletes series from the vectors, so a cached child stays the one the
// vector exports.)
func (m *metrics) decisionCounter(k decisionKey) prometheus.Counter {
	if c, ok := (*m.decisionCache.Load())[k]; ok {
		return c
	}
	c := m.decisions.WithLabelValues(outcomeLabels[k.outcome], k.tier)
	m.decisionMu.Lock()
	defer m.decisionMu.Unlock()
	old := *m.decisionCache.Load()
	if _, ok := old[k]; !ok && len(old) < maxCachedDecisionKeys {
		next := make(map[decisionKey]prometheus.Counter, len(old)+1)
		maps.Copy(next, old)
		next[k] = c
		m.decisionCache.Store(&next)
	}
	return c
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
