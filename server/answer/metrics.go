package answer

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorate/quorate/api"
)

// Decisions counts answers in quorate_decisions_total{outcome,tier}, for
// every API that answers decisions (HTTP, the Envoy service): each calls
// NewDecisions with the node's registry and they share the one vector.
//
//	outcome: allowed, denied, duplicate (a request id seen before),
//	shadow_denied (a tier in shadow mode would have denied; answered
//	allowed), degraded (the group could not decide and the tier's
//	when_unavailable is allow; answered allowed)
//
// The tier label takes the operator-defined tier names and "default".
type Decisions struct {
	vec *prometheus.CounterVec
	// cache holds the children seen so far; writers hold mu and replace
	// the map (see counter).
	cache atomic.Pointer[map[decisionKey]prometheus.Counter]
	mu    sync.Mutex
}

// NewDecisions returns a counter of decisions registered on reg (or the
// vector already registered there).
func NewDecisions(reg prometheus.Registerer) *Decisions {
	d := &Decisions{vec: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quorate_decisions_total",
		Help: "Admission decisions answered, by outcome (allowed, denied, duplicate: a request id seen before, shadow_denied: denied by a tier in shadow mode and answered allowed, degraded: answered allowed without a decision by a tier with when_unavailable allow) and tier.",
	}, []string{"outcome", "tier"}))}
	d.cache.Store(&map[decisionKey]prometheus.Counter{})
	return d
}

// Vec is the counter vector.
func (d *Decisions) Vec() *prometheus.CounterVec { return d.vec }

// Observe counts answers.
func (d *Decisions) Observe(answers []api.AllowResponse) {
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
			c, last = d.counter(k), k
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

// maxCachedDecisionKeys bounds the cache: tiers are operator-defined
// and few, but nothing stops a config from churning through names.
const maxCachedDecisionKeys = 1024

// counter returns the child of quorate_decisions_total for k. The
// children already seen are kept in a map that is replaced, never changed,
// so finding one takes no lock and no hashing of label values. (Nothing
// deletes series from the vectors, so a cached child stays the one the
// vector exports.)
func (d *Decisions) counter(k decisionKey) prometheus.Counter {
	if c, ok := (*d.cache.Load())[k]; ok {
		return c
	}
	c := d.vec.WithLabelValues(outcomeLabels[k.outcome], k.tier)
	d.mu.Lock()
	defer d.mu.Unlock()
	old := *d.cache.Load()
	if _, ok := old[k]; !ok && len(old) < maxCachedDecisionKeys {
		next := make(map[decisionKey]prometheus.Counter, len(old)+1)
		maps.Copy(next, old)
		next[k] = c
		d.cache.Store(&next)
	}
	return c
}

// Register registers c on reg and returns it, or returns the identical
// collector already registered (so several Servers may share a registry).
// Any other registration failure is a programming error and panics, like
// prometheus.MustRegister.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
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
	panic(fmt.Sprintf("registering metrics: %v", err))
}
