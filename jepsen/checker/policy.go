package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// parsePolicy converts a recorded change into a bucket.Policy.
func parsePolicy(c history.Policy) (bucket.Policy, error) {
	rate, err := bucket.ParseRate(c.RatePerSec)
	if err != nil {
		return bucket.Policy{}, err
	}
	p := bucket.Policy{Capacity: c.Capacity, Rate: rate}
	return p, p.Validate()
}

// change is one policy change of a tier as the checkers see it.
type change struct {
	pol bucket.Policy
	// from is the earliest time it may take effect (its invoke, or -∞ when
	// unknown); ack the time by which it certainly has (+∞ if not acked).
	from, ack int64
	// to is the latest time it may still be the policy in force: the
	// earliest ack of a change invoked after this one was acked.
	to      int64
	idx     int // index in History.Policies
	version uint64
}

// timeline is what a tier's policy may be over the run.
type timeline struct {
	tier    string
	initial bucket.Policy
	// initialTo is the latest time the initial policy may be in force.
	initialTo int64
	changes   []change
}

// timelineFor builds the timeline of tier from p and h.Policies. A change
// that is not acked may take effect at any time after its invoke, or never;
// one whose policy is invalid is ignored unless acked (WellFormed reports
// that).
func (p Params) timelineFor(h history.History, tier string) timeline {
	tl := timeline{tier: tier, initial: p.Default, initialTo: math.MaxInt64}
	if tp, ok := p.Tiers[tier]; ok && tier != bucket.DefaultTierName && tp.Validate() == nil {
		tl.initial = tp
	}
	for i, c := range h.Policies {
		if c.Tier != tier {
			continue
		}
		pol, err := parsePolicy(c)
		if err != nil {
			continue
		}
		ch := change{pol: pol, from: math.MinInt64, ack: math.MaxInt64, idx: i, version: c.Version}
		if c.Invoke != 0 {
			ch.from = c.Invoke
		}
		if c.Acked {
			ch.ack = c.Time
			tl.initialTo = min(tl.initialTo, c.Time)
		}
		tl.changes = append(tl.changes, ch)
	}
	for i := range tl.changes {
		to := int64(math.MaxInt64)
		for j, m := range tl.changes {
			if j != i && m.from > tl.changes[i].ack {
				to = min(to, m.ack)
			}
		}
		tl.changes[i].to = to
	}
	slices.SortStableFunc(tl.changes, func(a, b change) int { return cmp.Compare(a.ack, b.ack) })
	return tl
}

// candidates returns the policies that may be in force at some time in
// [lo, hi] (an over-approximation: every policy that can be is included).
func (tl timeline) candidates(lo, hi int64) []bucket.Policy {
	var out []bucket.Policy
	if lo <= tl.initialTo {
		out = append(out, tl.initial)
	}
	for _, c := range tl.changes {
		if c.from <= hi && c.to >= lo {
			out = append(out, c.pol)
		}
	}
	return out
}

// largest returns the largest capacity and rate among the policies that may
// be in force at some time in [lo, hi].
func (tl timeline) largest(lo, hi int64) (capacity, rate int64) {
	for _, pol := range tl.candidates(lo, hi) {
		capacity, rate = max(capacity, pol.Capacity), max(rate, pol.Rate)
	}
	return capacity, rate
}

// static reports whether the tier's policy never changes.
func (tl timeline) static() bool { return len(tl.changes) == 0 }

// PolicyChanges checks that every ok answer (decision or read) reports the
// capacity of a policy that may be in force during the operation: once a
// change is acknowledged, no answer to an operation invoked after the ack
// may use an older policy (unless another change may have intervened), and
// no answer may use a policy that was not yet requested. For keys whose
// tier Params.KeyTiers gives, every answer must also name that tier. Only capacity is
// visible in an answer; a wrong rate shows up in the balances, which
// Linearizable checks. Duplicate answers carry the original decision and
// are skipped.
func PolicyChanges(h history.History, p Params) Result {
	r := newReport("policy", p)
	c := newClock(h)
	if err := p.Default.Validate(); err != nil {
		r.fail("params: default policy: %v", err)
		return r.result()
	}
	prep := prepare(h, p)
	timelines := map[string]timeline{}
	checked, afterAck, wrongTier := 0, 0, 0
	stale := map[string]int{}
	for _, kh := range prep.keys {
		tl, ok := timelines[kh.tier]
		if !ok {
			tl = p.timelineFor(h, kh.tier)
			timelines[kh.tier] = tl
		}
		ops := append(slices.Clone(kh.decisions), kh.reads...)
		_, assigned := p.KeyTiers[kh.key]
		for _, d := range ops {
			op := d.op
			if assigned && op.Tier != "" && op.Tier != kh.tier {
				wrongTier++
				r.fail("key %q: %s: decided under tier %q, but the key is assigned to tier %q", kh.key, describe(c, op), op.Tier, kh.tier)
			}
			if op.Limit == 0 {
				continue
			}
			checked++
			lastAcked := -1
			for i, ch := range tl.changes {
				if ch.ack < op.Invoke {
					lastAcked = i
				}
			}
			if lastAcked >= 0 {
				afterAck++
			}
			cands := tl.candidates(op.Invoke, op.Complete)
			if slices.ContainsFunc(cands, func(pol bucket.Policy) bool { return pol.Capacity == op.Limit }) {
				continue
			}
			stale[op.Node]++
			why := fmt.Sprintf("no policy with capacity %d may be in force then (possible capacities: %s)", op.Limit, capacities(cands))
			if lastAcked >= 0 {
				ch := tl.changes[lastAcked]
				why = fmt.Sprintf("tier %q was changed to capacity %d (version %d) and acked at %s, before the op was invoked; %s",
					kh.tier, ch.pol.Capacity, ch.version, c.at(ch.ack), why)
			}
			r.fail("key %q: %s: %s", kh.key, describe(c, op), why)
		}
	}
	acked := 0
	for _, ch := range h.Policies {
		if ch.Acked {
			acked++
		}
	}
	r.set("answers_checked", checked)
	r.set("answers_after_an_ack", afterAck)
	r.set("wrong_tier", wrongTier)
	r.set("changes", len(h.Policies))
	r.set("changes_acked", acked)
	for _, node := range sortedKeys(stale) {
		r.set("stale_on_"+node, stale[node])
	}
	return r.result()
}

func capacities(pols []bucket.Policy) string {
	var parts []string
	for _, p := range pols {
		s := fmt.Sprint(p.Capacity)
		if !slices.Contains(parts, s) {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
