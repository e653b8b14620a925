package client

import (
	"encoding/json"
	"sync"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
)

// unavailable is Allow's answer when no node decided in time:
// Config.OnUnavailable's, marked Degraded.
//
// FailLocal's limiter exists only in that mode (c.local is nil otherwise).
func (c *Client) unavailable(req api.AllowRequest) api.AllowResponse {
	switch c.cfg.OnUnavailable {
	case FailOpen:
		c.stats.failedOpen.Add(1)
		return api.AllowResponse{Allowed: true, Degraded: true, Tier: c.local.tierOf(req.Client)}
	case FailLocal:
		c.stats.failedLocal.Add(1)
		return c.local.decide(req.Client, *req.Cost, c.now().UnixNano())
	}
	c.stats.failedClosed.Add(1)
	return api.AllowResponse{Allowed: false, Degraded: true, Tier: c.local.tierOf(req.Client), RetryAfterMs: 1000}
}

// localLimiter is FailLocal's buckets: one per client, at the client's
// tier's policy divided by the number of instances, so that all instances
// together admit at most one cluster bucket's worth while the cluster is
// unreachable. It learns each client's tier, and each tier's policy, from
// the cluster's answers.
type localLimiter struct {
	instances int64
	fallback  *bucket.Policy
	max       int

	mu      sync.Mutex
	tiers   map[string]learnedPolicy // the cluster's policy of each tier seen
	clients map[string]*localClient
}

// learnedPolicy is a tier's policy as an answer gave it, with the rate as
// written, so an answer repeating it is not parsed again.
type learnedPolicy struct {
	bucket.Policy
	raw    json.Number // the token bucket's rate as answered
	window int64       // or the sliding window's seconds
}

type localClient struct {
	tier  string
	used  bool // state is a bucket FailLocal decided with
	state bucket.State
}

func newLocalLimiter(instances int, fallback *bucket.Policy, max int) *localLimiter {
	return &localLimiter{instances: int64(instances), fallback: fallback, max: max,
		tiers: map[string]learnedPolicy{}, clients: map[string]*localClient{}}
}

// learn records what a cluster decision says of the client's tier and of
// that tier's policy. A nil limiter (a client not in FailLocal mode)
// learns nothing.
func (l *localLimiter) learn(client string, d api.AllowResponse) {
	if l == nil || d.Tier == "" || d.Degraded {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case d.WindowSeconds > 0:
		// A sliding window is approximated by a bucket of its limit that
		// refills the limit once per window: the same average, a burst of
		// the limit.
		if t, ok := l.tiers[d.Tier]; !ok || t.window != d.WindowSeconds || t.Capacity != d.Limit {
			if p := (bucket.Policy{Capacity: d.Limit, Rate: d.Limit * bucket.Scale / d.WindowSeconds}); p.Validate() == nil {
				l.tiers[d.Tier] = learnedPolicy{Policy: p, window: d.WindowSeconds}
			}
		}
	case d.RefillPerSecond != "":
		if t, ok := l.tiers[d.Tier]; !ok || t.raw != d.RefillPerSecond || t.Capacity != d.Limit {
			if rate, err := bucket.ParseRate(d.RefillPerSecond.String()); err == nil {
				if p := (bucket.Policy{Capacity: d.Limit, Rate: rate}); p.Validate() == nil {
					l.tiers[d.Tier] = learnedPolicy{Policy: p, raw: d.RefillPerSecond}
				}
			}
		}
	}
	lc := l.clients[client]
	if lc == nil {
		if len(l.clients) >= l.max {
			l.sweepLocked()
			if len(l.clients) >= l.max {
				return
			}
		}
		lc = &localClient{}
		l.clients[client] = lc
	}
	lc.tier = d.Tier
}

func (l *localLimiter) tierOf(client string) string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc := l.clients[client]; lc != nil {
		return lc.tier
	}
	return ""
}

// decide decides cost for client with its local bucket.
func (l *localLimiter) decide(client string, cost, now int64) api.AllowResponse {
	l.mu.Lock()
	defer l.mu.Unlock()
	lc := l.clients[client]
	tier := bucket.DefaultTierName
	if lc != nil {
		tier = lc.tier
	}
	lp, ok := l.tiers[tier]
	p := lp.Policy
	if !ok && l.fallback != nil {
		p, ok = *l.fallback, true
	}
	if !ok {
		return api.AllowResponse{Allowed: false, Degraded: true, Tier: tier, RetryAfterMs: 1000}
	}
	p = bucket.Policy{Capacity: max(1, p.Capacity/l.instances), Rate: p.Rate / l.instances}
	if lc == nil {
		if len(l.clients) >= l.max {
			l.sweepLocked()
		}
		if len(l.clients) >= l.max {
			return api.AllowResponse{Allowed: false, Degraded: true, Tier: tier, RetryAfterMs: 1000}
		}
		lc = &localClient{tier: tier}
		l.clients[client] = lc
	}
	if !lc.used {
		lc.state, lc.used = bucket.New(p, now), true
	}
	var d bucket.Decision
	lc.state, d = bucket.Decide(p, lc.state, now, cost)
	return api.AllowResponse{
		Allowed:         d.Allowed,
		Remaining:       d.RemainingTokens(),
		Limit:           p.Capacity,
		RetryAfterMs:    msCeil(d.RetryAfter),
		ResetAfterMs:    msCeil(d.ResetAfter),
		Tier:            tier,
		RefillPerSecond: jsonRate(p.Rate),
		StampUnixNano:   now,
		Degraded:        true,
	}
}

// sweepLocked forgets the clients FailLocal never decided for: they hold
// only a tier, which a later answer teaches again.
func (l *localLimiter) sweepLocked() {
	for id, lc := range l.clients {
		if !lc.used {
			delete(l.clients, id)
		}
	}
}

func msCeil(ns int64) int64 {
	if ns == bucket.Never {
		return bucket.Never
	}
	return (ns + 999_999) / 1_000_000
}

// jsonRate writes a rate as the API does.
func jsonRate(rate int64) json.Number { return json.Number(bucket.FormatRate(rate)) }
