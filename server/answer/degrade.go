package answer

import (
	"context"
	"errors"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
)

// Undecided reports whether err means the cluster could not decide in
// time: no leader or quorum, or the deadline passed with the outcome
// unknown. Nothing else degrades: a refused request, an overloaded node
// or a full disk is answered as the error it is.
func Undecided(err error) bool {
	if e, ok := cluster.Classify(err); ok {
		switch e.Code() {
		case api.CodeUnavailable, api.CodeTimeout, api.CodeOutcomeUnknown:
			return true
		}
		return false
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// PolicyOf returns the tier and policy a client is decided by, as the
// answering node knows them without asking anyone (cluster.Node.PolicyOf).
type PolicyOf func(client string) (string, bucket.Policy)

// Degrade fills out with one answer per request and reports true when err
// is Undecided and the tier of every request's client, as policyOf knows
// it, says "when_unavailable": "allow": each is allowed, marked degraded,
// with the policy's limit and nothing of a balance. Otherwise it reports
// false and the caller answers err, for the whole batch: a caller that
// asked for several decisions at once gets all of them or the error.
func Degrade(reqs []fsm.AllowRequest, err error, policyOf PolicyOf, rates *Rates, out []api.AllowResponse) bool {
	if !Undecided(err) {
		return false
	}
	now := time.Now().UnixNano()
	for i, r := range reqs {
		tier, p := policyOf(r.Client)
		if p.WhenUnavailable != bucket.AllowDegraded {
			return false
		}
		out[i] = api.AllowResponse{Allowed: true, Degraded: true, Limit: p.Capacity, Tier: tier, StampUnixNano: now, WindowSeconds: p.Window / bucket.Second}
		if p.Algorithm == bucket.TokenBucket {
			out[i].RefillPerSecond = rates.Get(p.Rate)
		}
	}
	return true
}
