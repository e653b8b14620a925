package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// parsePolicy converts a recorded change into a bucket.Policy: a sliding
// window if its Algorithm says so, else a token bucket.
func parsePolicy(c history.Policy) (bucket.Policy, error) {
	if c.Algorithm == bucket.SlidingWindow.String() {
		return bucket.Spec{Algorithm: c.Algorithm, Limit: strconv.FormatInt(c.Limit, 10),
			WindowSeconds: strconv.FormatInt(c.WindowSeconds, 10)}.Parse()
	}
	rate, err := bucket.ParseRate(c.RatePerSec)
	if err != nil {
		return bucket.Policy{}, err
	}
	p := bucket.Policy{Capacity: c.Capacity, Rate: rate}
	return p, p.Validate()
}

// isWindow reports whether p is a sliding window.
func isWindow(p bucket.Policy) bool { return p.Algorithm == bucket.SlidingWindow }

// change is one policy change of a tier as the checkers see it.
type change struct {
	pol bucket.Policy
	inForce
	idx     int // index in History.Policies
	version uint64
	// fill: the change was made with on_raise fill, so if it raises the
	// tier's capacity it refills every client of the tier, once, where it
	// is applied. sure: the tier certainly existed when it was applied (a
	// change that creates a tier fills nothing), so the fill is certain
	// for a raise; otherwise it may or may not happen.
	fill, sure bool
}

// mayFillIn reports whether c may fill the clients of its tier at a group
// time in [lo, hi], group times being within slack of the harness's.
func (c change) mayFillIn(lo, hi, slack int64) bool {
	latest := c.ack
	if latest != math.MaxInt64 {
		latest += slack
	}
	return c.fill && c.from-slack <= hi && latest >= lo
}

// inForce is when a change (of a tier's policy, or of a key's tier) is in
// force.
type inForce struct {
	// from is the earliest time it may take effect (its invoke, or -∞ when
	// unknown); ack the time by which it certainly has (+∞ if not acked).
	from, ack int64
	// to is the latest time it may still be in force: the earliest ack of
	// a change invoked after this one was acked (+∞ if none).
	to int64
}

// settle sets every change's to from the others, then sorts xs by ack.
func settle[T any](xs []T, spanOf func(*T) *inForce) {
	for i := range xs {
		to := int64(math.MaxInt64)
		for j := range xs {
			if m := spanOf(&xs[j]); j != i && m.from > spanOf(&xs[i]).ack {
				to = min(to, m.ack)
			}
		}
		spanOf(&xs[i]).to = to
	}
	slices.SortStableFunc(xs, func(a, b T) int { return cmp.Compare(spanOf(&a).ack, spanOf(&b).ack) })
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
	existed := false
	if tp, ok := p.Tiers[tier]; ok && tier != bucket.DefaultTierName && tp.Validate() == nil {
		tl.initial, existed = tp, true
	}
	for i, c := range h.Policies {
		if c.Tier != tier {
			continue
		}
		pol, err := parsePolicy(c)
		if err != nil {
			continue
		}
		ch := change{pol: pol, inForce: inForce{from: math.MinInt64, ack: math.MaxInt64}, idx: i, version: c.Version, fill: c.OnRaise == "fill"}
		if c.Invoke != 0 {
			ch.from = c.Invoke
		}
		// The tier exists when the change applies if it did at the start
		// of the run, or an earlier change of it was acked before this one
		// was sent (tiers are never deleted by the harness).
		ch.sure = tier == bucket.DefaultTierName || existed || slices.ContainsFunc(tl.changes, func(o change) bool { return o.ack < ch.from })
		if c.Acked {
			ch.ack = c.Time
			tl.initialTo = min(tl.initialTo, c.Time)
		}
		tl.changes = append(tl.changes, ch)
	}
	settle(tl.changes, func(c *change) *inForce { return &c.inForce })
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

// static reports whether the tier's policy never changes.
func (tl timeline) static() bool { return len(tl.changes) == 0 }

// PolicyChanges checks that every ok answer (decision or read) reports the
// capacity of a policy that may be in force during the operation: once a
// change is acknowledged, no answer to an operation invoked after the ack
// may use an older policy (unless another change may have intervened), and
// no answer may use a policy that was not yet requested. A key's tier may
// change (History.Assignments): an answer may use a policy of any tier the
// key may be in during the operation (of the tier the answer names, if the
// key may be in it), so once an assignment is acknowledged no later answer
// may use the old tier's policy. For keys whose initial tier Params.KeyTiers
// gives, every answer must also name a tier the key may be in. Only capacity is
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
		kp := p.policiesOf(h, kh, timelines)
		ops := append(slices.Clone(kh.decisions), kh.reads...)
		_, assigned := p.KeyTiers[kh.key]
		for _, d := range ops {
			op := d.op
			tiers := kp.tiers.at(op.Invoke, op.Complete)
			if assigned && op.Tier != "" && !slices.Contains(tiers, op.Tier) {
				wrongTier++
				r.fail("key %q: %s: decided under tier %q, but the key is assigned to tier %s then", kh.key, describe(c, op), op.Tier, strings.Join(quoteAll(tiers), " or "))
			}
			if op.Limit == 0 {
				continue
			}
			checked++
			// The answer names the tier that decided: its limit must be a
			// policy of that tier (if the key may be in it), else of any
			// tier the key may be in.
			var cands []bucket.Policy
			tier := ""
			if slices.Contains(tiers, op.Tier) {
				tier = op.Tier
				cands = kp.timelines[tier].candidates(op.Invoke, op.Complete)
			} else {
				if len(tiers) == 1 {
					tier = tiers[0]
				}
				cands = kp.candidates(op.Invoke, op.Complete)
			}
			lastAcked := -1
			var tl timeline
			if tier != "" {
				tl = kp.timelines[tier]
				for i, ch := range tl.changes {
					if ch.ack < op.Invoke {
						lastAcked = i
					}
				}
			}
			moved := slices.ContainsFunc(kp.tiers.moves, func(m move) bool { return m.ack < op.Invoke })
			if lastAcked >= 0 || moved {
				afterAck++
			}
			if slices.ContainsFunc(cands, func(pol bucket.Policy) bool { return pol.Capacity == op.Limit }) {
				continue
			}
			stale[op.Node]++
			why := fmt.Sprintf("no policy with capacity %d may be in force then (possible capacities: %s)", op.Limit, capacities(cands))
			if lastAcked >= 0 {
				ch := tl.changes[lastAcked]
				why = fmt.Sprintf("tier %q was changed to capacity %d (version %d) and acked at %s, before the op was invoked; %s",
					tier, ch.pol.Capacity, ch.version, c.at(ch.ack), why)
			}
			if len(kp.tiers.moves) > 0 {
				why += fmt.Sprintf(" (the key may be in tier %s then)", strings.Join(quoteAll(tiers), " or "))
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
	r.set("assignments", len(h.Assignments))
	for _, node := range sortedKeys(stale) {
		r.set("stale_on_"+node, stale[node])
	}
	return r.result()
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
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

// tierName is the tier an assignment puts a key in: "" (removed) is the
// default tier.
func tierName(t string) string {
	if t == "" {
		return bucket.DefaultTierName
	}
	return t
}

// move is one tier assignment of a key as the checkers see it; from, ack
// and to as for a change.
type move struct {
	tier string
	inForce
	idx int // index in History.Assignments
}

// tierTimeline is what a key's tier may be over the run: initial (from
// Params.KeyTiers, see keyTier) until the first acked assignment, then the
// tiers of its assignments (h.Assignments). An acked assignment is in force
// for every decision invoked after its ack, until a later assignment may
// have replaced it; one that is not acked may take effect at any time after
// its invoke, or never.
type tierTimeline struct {
	initial   string
	initialTo int64
	moves     []move // sorted by ack
}

// tiersOf builds the tier timeline of kh's key.
func tiersOf(h history.History, kh *keyHistory) tierTimeline {
	tt := tierTimeline{initial: kh.tier, initialTo: math.MaxInt64}
	for i, a := range h.Assignments {
		if a.Key != kh.key {
			continue
		}
		m := move{tier: tierName(a.Tier), inForce: inForce{from: a.Invoke, ack: math.MaxInt64}, idx: i}
		if a.Invoke == 0 {
			m.from = math.MinInt64
		}
		if a.Acked {
			m.ack = a.Time
			tt.initialTo = min(tt.initialTo, a.Time)
		}
		tt.moves = append(tt.moves, m)
	}
	settle(tt.moves, func(m *move) *inForce { return &m.inForce })
	return tt
}

// at returns the tiers the key may be in at some time in [lo, hi] (an
// over-approximation), without repeats, in timeline order.
func (tt tierTimeline) at(lo, hi int64) []string {
	var out []string
	if lo <= tt.initialTo {
		out = append(out, tt.initial)
	}
	for _, m := range tt.moves {
		if m.from <= hi && m.to >= lo && !slices.Contains(out, m.tier) {
			out = append(out, m.tier)
		}
	}
	return out
}

// all returns every tier the key may ever be in: the initial one first.
func (tt tierTimeline) all() []string { return tt.at(math.MinInt64, math.MaxInt64) }

// keyPolicies is what a key's policy may be over the run: the tiers it may
// be in, each with its policy timeline.
type keyPolicies struct {
	tiers     tierTimeline
	timelines map[string]timeline
}

// policiesOf builds kh's keyPolicies; cache holds the tier timelines built
// so far (may be nil).
func (p Params) policiesOf(h history.History, kh *keyHistory, cache map[string]timeline) keyPolicies {
	kp := keyPolicies{tiers: tiersOf(h, kh), timelines: map[string]timeline{}}
	for _, t := range kp.tiers.all() {
		tl, ok := cache[t]
		if !ok {
			tl = p.timelineFor(h, t)
			if cache != nil {
				cache[t] = tl
			}
		}
		kp.timelines[t] = tl
	}
	return kp
}

// candidates returns the policies the key may be under at some time in
// [lo, hi]: those of every tier it may be in then.
func (kp keyPolicies) candidates(lo, hi int64) []bucket.Policy {
	var out []bucket.Policy
	for _, t := range kp.tiers.at(lo, hi) {
		out = append(out, kp.timelines[t].candidates(lo, hi)...)
	}
	return out
}

// largest returns the largest capacity and rate among the policies the key
// may be under at some time in [lo, hi].
func (kp keyPolicies) largest(lo, hi int64) (capacity, rate int64) {
	for _, pol := range kp.candidates(lo, hi) {
		capacity, rate = max(capacity, pol.Capacity), max(rate, pol.Rate)
	}
	return capacity, rate
}

// windows reports whether the key may ever be under a sliding window, and
// buckets whether it may ever be under a token bucket.
func (kp keyPolicies) kinds() (windows, buckets bool) {
	for _, pol := range kp.candidates(math.MinInt64, math.MaxInt64) {
		if isWindow(pol) {
			windows = true
		} else {
			buckets = true
		}
	}
	return windows, buckets
}

// fillsIn counts the fill changes of the tiers the key may be in that may
// fill it at a group time in [lo, hi] (see change.mayFillIn).
func (kp keyPolicies) fillsIn(lo, hi, slack int64) int {
	n := 0
	for _, t := range kp.tiers.at(lo-slack, hi+slack) {
		for _, c := range kp.timelines[t].changes {
			if c.mayFillIn(lo, hi, slack) {
				n++
			}
		}
	}
	return n
}

// static reports whether the key's policy never changes.
func (kp keyPolicies) static() bool {
	return len(kp.tiers.moves) == 0 && kp.timelines[kp.tiers.initial].static()
}
