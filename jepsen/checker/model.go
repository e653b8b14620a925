package checker

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/quorate/quorate/bucket"
)

// The porcupine model of one key's token bucket.
//
// A state is a set of possible bucket states. Each one keeps the balances
// the bucket may hold after the last decision as an interval: a refill is
// min(capacity, b + δ), monotone and continuous in b, and every observation
// (allowed or not, the remaining whole tokens) intersects the interval with
// another one, so the possible balances always form an interval. Without
// info ops and policy changes the interval is exactly what the API's
// rounding leaves unknown (below one token), computed with the exact
// arithmetic of bucket.Decide.
//
// A step is legal iff some possible state can produce the observed answer:
// a decision refills from the previous decision's stamp to its own (stamps
// may not go back: the group time is monotonic in log order), admits iff
// the balance covers the cost, and must report the observed allowed,
// remaining and limit. A read must report a balance the bucket may hold at
// its stamp, and changes nothing.
//
// Info ops (outcome unknown, peeks included) are carried as pending: each may be applied,
// as an admission, in any later gap between two decisions (no earlier than
// its invoke minus the clock slack), or never; a denial changes nothing
// (but see policy changes below). At every decision any subset of the
// pending ops may be settled in the gap before it; the balance then lies
// between taking them all at the end of the gap, min(C, lo+δ) - P, and at
// its start, min(C, hi+δ-P) (nothing is lost to the cap), and they can be
// taken at all iff hi+δ >= P.
// Every settled total the subset sums allow is tried; the hull of the
// balances that match the answer is kept, and the ops left pending are, per
// cost, the most any matching choice leaves. Because a pending op may
// settle in any later gap, placing it at its invoke loses nothing, so info
// ops are given the interval [invoke, invoke] (see keyOperations), and the
// search never has to try other places for them.
//
// Policy changes are operations too, spanning [invoke, ack] (unacked:
// [invoke, +∞), and possibly never applied). A decision uses the policy of
// the latest applied change, refilling the time since the previous decision
// at its rate and clamping to its capacity, exactly as bucket.Decide does.
// Because the leader forgets full buckets, a bucket that may have been full
// since a policy change may also restart full at the new capacity: a second
// possibility. A pending op that may have been applied in a gap with a
// policy change leaves the balance only bounded by the extremes of the
// policies in force in the gap (see spans): applied before the change, even
// a denial refilled the time up to it at the old rate.
//
// A policy change made with on_raise fill that raises the capacity of the
// key's tier (above the tier's policy in force in that state) refills the
// key, as the server does: it forgets the bucket at the change's place in
// the log, so the next decision finds a new bucket, full at the capacity
// then in force (a "fresh" state: like a new key, but its stamps still may
// not go back). It happens once, at the change's step, and only to a key
// in the tier then: a key moved in later keeps its balance. A change that
// may have created its tier (see change.sure) may fill or not.
//
// Tier assignments are operations too, spanning [invoke, ack] the same way.
// The state keeps the key's current tier and the current policy of every
// tier the key may be in: a tier's policy change updates that tier's
// policy, and is a change of the key's policy only while the key is in that
// tier; an assignment to another tier switches the key to that tier's
// current policy exactly like a policy change (the balance carries over,
// clamped to the new capacity at the next decision; raising it adds
// nothing).
//
// States that differ only in their balances and pending ops are merged into
// one (the hull of the balances, the most of each pending op), which keeps
// porcupine's state small.
//
// Precision: exact (to the unit of 1e-18 token) without info ops and policy
// changes. With info ops, what is kept over-approximates what is possible
// mostly downwards: the top of a hull is the top of some real possibility,
// so a balance lower than possible (an under-admission, harmless for a rate
// limiter) may be accepted, a higher one not. Pending ops settled across a
// policy change are bounded by the gap's extreme rates and capacities, a
// bucket that may have been forgotten by [capacity - pending, capacity], and
// more than maxPendingSum pending tokens only by [0, capacity]; ModelStats
// counts how often each of these is used.

const noStamp = math.MinInt64

type stepKind uint8

const (
	stepAllow stepKind = iota
	stepRead
	stepPolicy
	stepAssign
)

// step is the input of one porcupine operation.
type step struct {
	kind stepKind
	// info: an allow whose outcome is unknown; maybe: a policy change that
	// was not acked and may never apply; fill: a policy change with
	// on_raise fill, sure if its tier certainly existed (change.sure).
	info, maybe, fill, sure bool
	cost                    int64
	// stamp is the decision's group time; for an info op, earliest is the
	// earliest group time it can have been applied at (invoke - slack); for
	// a policy change, latest is the latest group time it can have been
	// applied at (ack + slack, or +∞).
	stamp, earliest, latest int64
	allowed                 bool
	remaining               int64
	limit                   int64
	pol                     bucket.Policy
	// tier is, for a policy change, the index of the changed tier among
	// the key's tiers, and for an assignment, of the tier assigned.
	tier int
	// idx is the op's index in History.Ops (or History.Policies, or
	// History.Assignments).
	idx int
}

// bstate is one possible state of a key's bucket.
type bstate struct {
	// lo and hi bound the balance after the last decision.
	lo, hi amount
	// last is the last decision's stamp; noStamp before the first one (the
	// key has no bucket: a new key is full).
	last int64
	// fresh: a fill forgot the bucket since last, so the next decision
	// finds it full, like a new key's (isNew), at a stamp no earlier than
	// last.
	fresh bool
	// pend is the multiset of pending info ops (encodePending).
	pend string
	// pol is the policy in force: that of tier, the key's current tier.
	pol bucket.Policy
	// tier is the index of the key's current tier among its tiers, and
	// pols the current policy of each of those tiers (encodePolicies).
	tier int
	pols string
	// changed: a policy change was applied since last; gap bounds the
	// policies in force since last; reclaim: the bucket may have been full
	// under a policy in force since last and been forgotten.
	changed, reclaim bool
	gap              gap
}

// isNew reports whether the key has no bucket: it never had one, or a
// fill forgot it.
func (s bstate) isNew() bool { return s.last == noStamp || s.fresh }

// newFrom is when a key with no bucket may have been given a new one by
// the first of the pending ops settled since from: no earlier than from,
// nor, after a fill, than the last decision (pending ops that went
// through a decision have lost their earliest time, see rest).
func (s bstate) newFrom(from int64) int64 {
	if s.fresh {
		return max(from, s.last)
	}
	return from
}

// filled returns s after a fill by a change of the key's tier to pol: no
// bucket (full at the next decision), pending ops still pending (one
// applied before the fill left no trace, which is the same as one never
// applied).
func (s bstate) filled(pol bucket.Policy) bstate {
	return bstate{last: s.last, fresh: s.last != noStamp, pend: s.pend, pol: pol, gap: gapOf(pol), tier: s.tier, pols: setPolicy(s.pols, s.tier, pol)}
}

// span is an interval of possible balances.
type span struct{ lo, hi amount }

func initialState(pols []bucket.Policy) bstate {
	return bstate{last: noStamp, pol: pols[0], gap: gapOf(pols[0]), pols: encodePolicies(pols)}
}

// encodePolicies renders the policies of a key's tiers, in tier order.
func encodePolicies(pols []bucket.Policy) string {
	b := make([]byte, 0, 16*len(pols))
	for _, p := range pols {
		b = binary.BigEndian.AppendUint64(b, uint64(p.Capacity))
		b = binary.BigEndian.AppendUint64(b, uint64(p.Rate))
	}
	return string(b)
}

// policyOf returns the current policy of the key's tier i.
func (s bstate) policyOf(i int) bucket.Policy {
	r := []byte(s.pols[16*i : 16*i+16])
	return bucket.Policy{Capacity: int64(binary.BigEndian.Uint64(r)), Rate: int64(binary.BigEndian.Uint64(r[8:]))}
}

// setPolicy returns pols with tier i's policy set to pol.
func setPolicy(pols string, i int, pol bucket.Policy) string {
	b := []byte(pols)
	binary.BigEndian.PutUint64(b[16*i:], uint64(pol.Capacity))
	binary.BigEndian.PutUint64(b[16*i+8:], uint64(pol.Rate))
	return string(b)
}

// switchTo returns s with the policy in force changed to pol at a time no
// later than latest (group time), as of the next decision.
func (s bstate) switchTo(pol bucket.Policy, latest int64) bstate {
	applied := s
	applied.pol = pol
	applied.changed = true
	applied.gap = s.gap.with(pol)
	// The outgoing policy was in force until the change, no later than
	// latest: the bucket may have filled up under it.
	applied.reclaim = s.reclaim || (!s.isNew() && s.mayFill(s.pol, latest))
	return applied
}

// spans returns the possible balances at group time t, before the decision
// at t takes anything, if settle tokens of pending ops (the earliest of
// which may have been applied from `from` on) were taken since the last
// decision: refilled under the current policy and clamped to its capacity.
// eligible says whether any pending op may have been applied by t. It
// returns nothing if t is before the last decision.
func (s bstate) spans(t, settle, from int64, eligible bool, fb *fallbacks) []span {
	if s.last != noStamp && t < s.last {
		return nil
	}
	capacity := tokens(s.pol.Capacity)
	taken := tokens(settle)
	var out []span
	switch {
	case eligible && s.changed:
		// Pending ops settled in a gap with a policy change were decided
		// under whichever policy was in force then (allowed, they took
		// tokens; even denied, they refilled the time up to them at that
		// policy's rate). Every decision of the gap refilled the time since
		// the one before at the rate of a policy of the gap and clamped to
		// its capacity, and the settled ones took settle tokens in all. So
		// the balance is at most hi + maxRate·elapsed - settle (a cap only
		// removes tokens) and at least min(minCap, lo + minRate·elapsed) -
		// settle (each step min(C, b + r·dt) - x keeps that bound), then
		// clamped to the current capacity. A new key started full at the
		// capacity of some policy of the gap.
		fb.across = true
		lo, hi, start := s.lo, s.hi, s.last
		if s.isNew() {
			lo, hi, start = tokens(s.gap.minCap), tokens(s.gap.maxCap), s.newFrom(from)
		}
		top := hi.add(refillOf(t-start, s.gap.maxRate))
		if top.cmp(taken) < 0 {
			break
		}
		sp := span{
			lo: maxAmount(amount{}, minAmount(tokens(s.gap.minCap), lo.add(refillOf(t-start, s.gap.minRate))).sub(taken)),
			hi: minAmount(capacity, top.sub(taken)),
		}
		fb.wide = fb.wide || (sp.lo == amount{} && sp.hi == capacity)
		out = append(out, sp)
	case s.isNew() && settle == 0:
		out = append(out, span{lo: capacity, hi: capacity})
	default:
		lo, hi, start := s.lo, s.hi, s.last
		if s.isNew() {
			// A new key: full when the first settled op was applied.
			lo, hi, start = capacity, capacity, s.newFrom(from)
		}
		d := refillOf(t-start, s.pol.Rate)
		if settle == 0 {
			out = append(out, span{lo: minAmount(capacity, lo.add(d)), hi: minAmount(capacity, hi.add(d))})
			break
		}
		if hi.add(d).cmp(taken) < 0 {
			break
		}
		out = append(out, span{
			lo: maxAmount(amount{}, minAmount(capacity, lo.add(d)).sub(taken)),
			hi: minAmount(capacity, hi.add(d).sub(taken)),
		})
	}
	if s.changed && !s.isNew() && (s.reclaim || s.mayFill(s.pol, t)) {
		// It may have been full since the change and been forgotten: it
		// starts again full at the current capacity.
		fb.reclaim = true
		out = append(out, span{lo: maxAmount(amount{}, capacity.sub(taken)), hi: capacity})
	}
	return out
}

// mayFill reports whether the bucket may be full under pol by group time
// t, refilling from the last decision.
func (s bstate) mayFill(pol bucket.Policy, t int64) bool {
	if t == math.MaxInt64 {
		return pol.Rate > 0 || s.hi.cmp(tokens(pol.Capacity)) >= 0
	}
	return s.hi.add(refillOf(t-s.last, pol.Rate)).cmp(tokens(pol.Capacity)) >= 0
}

// outcomes calls match with every span the bucket may hold at t, before
// the decision (or read) at t, for every total of pending ops that may
// have been settled since the last decision, in increasing order of the
// total, and returns the totals for which some span matched. match also
// returns the lowest top of a span that could match: a larger total only
// lowers the balance, so the search stops once no span reaches it.
func (s bstate) outcomes(t int64, st settlement, fb *fallbacks, match func(sp span) (need amount, ok bool)) []int64 {
	if st.total > maxPendingSum {
		// Too many pending tokens to track: anything from empty to full.
		fb.overflow, fb.wide = true, true
		if _, ok := match(span{lo: amount{}, hi: tokens(s.pol.Capacity)}); ok {
			return []int64{0}
		}
		return nil
	}
	var feasible []int64
	reachable := st.sums(-1)
	for p := int64(0); p <= st.total; p++ {
		if !reachable.has(p) {
			continue
		}
		spans := s.spans(t, p, st.from, len(st.costs) > 0, fb)
		if len(spans) == 0 && p > 0 {
			break // not even the highest balance covers p
		}
		matched, above := false, false
		for _, sp := range spans {
			need, ok := match(sp)
			matched = matched || ok
			above = above || sp.hi.cmp(need) >= 0
		}
		if matched {
			feasible = append(feasible, p)
		}
		// Across a policy change a settled total gives [0, capacity],
		// which is not monotone in the total: keep looking.
		if !above && !s.changed {
			break
		}
	}
	return feasible
}

// next returns the states after in (one per way it can happen), or none if
// in cannot happen in s.
func (s bstate) next(in step, fb *fallbacks) []bstate {
	switch in.kind {
	case stepPolicy:
		// A change of a tier the key is not in only matters once the key
		// is assigned to it.
		applied := s
		if in.tier == s.tier {
			applied = s.switchTo(in.pol, in.latest)
		}
		applied.pols = setPolicy(s.pols, in.tier, in.pol)
		out := []bstate{applied}
		if in.fill && in.tier == s.tier && in.pol.Capacity > s.policyOf(in.tier).Capacity {
			// A raise with on_raise fill: the key is refilled here, once
			// (or, if the change may have created the tier, maybe not).
			fb.fill = true
			out = append(out[:0:0], s.filled(in.pol))
			if !in.sure {
				out = append(out, applied)
			}
		}
		if in.maybe {
			return append(out, s)
		}
		return out
	case stepAssign:
		// A move to another tier changes the key's policy to that tier's
		// current one, exactly like a policy change: the balance carries
		// over (clamped to the new capacity at the next decision).
		applied := s
		if in.tier != s.tier {
			applied = s.switchTo(s.policyOf(in.tier), in.latest)
			applied.tier = in.tier
		}
		if in.maybe {
			return []bstate{s, applied}
		}
		return []bstate{applied}
	case stepRead:
		if (in.limit != 0 && in.limit != s.pol.Capacity) || (s.last != noStamp && in.stamp < s.last) {
			return nil
		}
		need := tokens(in.remaining)
		feasible := s.outcomes(in.stamp, s.settlement(in.stamp), fb, func(sp span) (amount, bool) {
			_, ok := observe(sp, in.remaining)
			return need, ok
		})
		if len(feasible) == 0 {
			return nil
		}
		// A read takes nothing and leaves the group time alone.
		return []bstate{s}
	}
	if in.info {
		// A peek of unknown outcome is pending too: it takes nothing, but
		// applied before a policy change it refilled the time up to it at
		// the old rate, which the bounds across a change allow for.
		taken := s
		taken.pend = encodePending(append(decodePending(s.pend), pending{earliest: in.earliest, cost: in.cost, n: 1}))
		return []bstate{taken}
	}
	if (in.limit != 0 && in.limit != s.pol.Capacity) || (s.last != noStamp && in.stamp < s.last) {
		return nil
	}
	cost := tokens(in.cost)
	need := tokens(in.remaining)
	if in.allowed {
		need = tokens(in.remaining + in.cost)
	}
	var hull span
	found := false
	st := s.settlement(in.stamp)
	feasible := s.outcomes(in.stamp, st, fb, func(sp span) (amount, bool) {
		if in.allowed {
			if sp.hi.cmp(cost) < 0 {
				return need, false
			}
			sp = span{lo: maxAmount(sp.lo, cost).sub(cost), hi: sp.hi.sub(cost)}
		} else {
			if sp.lo.cmp(cost) >= 0 {
				return need, false
			}
			sp.hi = minAmount(sp.hi, cost.sub(oneUnit))
		}
		sp, ok := observe(sp, in.remaining)
		if !ok {
			return need, false
		}
		if !found {
			hull, found = sp, true
		} else {
			hull = span{lo: minAmount(hull.lo, sp.lo), hi: maxAmount(hull.hi, sp.hi)}
		}
		return need, true
	})
	if len(feasible) == 0 {
		return nil
	}
	return []bstate{{lo: hull.lo, hi: hull.hi, last: in.stamp, pend: st.rest(feasible), pol: s.pol, gap: gapOf(s.pol), tier: s.tier, pols: s.pols}}
}

// observe intersects sp with the balances whose whole tokens, rounded down,
// are remaining.
func observe(sp span, remaining int64) (span, bool) {
	sp.lo = maxAmount(sp.lo, tokens(remaining))
	sp.hi = minAmount(sp.hi, tokens(remaining+1).sub(oneUnit))
	return sp, sp.lo.cmp(sp.hi) <= 0
}

// mergeable reports whether a and b differ only in their balances and
// pending ops.
func mergeable(a, b bstate) bool {
	return a.last == b.last && a.fresh == b.fresh && a.pol == b.pol && a.tier == b.tier && a.pols == b.pols && a.changed == b.changed && a.reclaim == b.reclaim && a.gap == b.gap
}

// merge returns one state that allows everything a or b does: the hull of
// their balances and, for every pending op, the most either has.
func merge(a, b bstate) bstate {
	a.lo, a.hi = minAmount(a.lo, b.lo), maxAmount(a.hi, b.hi)
	if a.pend == b.pend {
		return a
	}
	type run struct{ earliest, cost int64 }
	count := map[run]int{}
	for _, p := range decodePending(a.pend) {
		count[run{p.earliest, p.cost}] = p.n
	}
	for _, p := range decodePending(b.pend) {
		r := run{p.earliest, p.cost}
		count[r] = max(count[r], p.n)
	}
	var all []pending
	for r, n := range count {
		all = append(all, pending{earliest: r.earliest, cost: r.cost, n: n})
	}
	a.pend = encodePending(all)
	return a
}

// stateSet is a porcupine state: the possible bstates, sorted. States that
// differ only in balance and pending ops are merged (merge), which keeps
// the set small and can only accept more.
type stateSet []bstate

func newStateSet(all []bstate) stateSet {
	var out stateSet
	for _, s := range all {
		if i := slices.IndexFunc(out, func(o bstate) bool { return mergeable(o, s) }); i >= 0 {
			out[i] = merge(out[i], s)
		} else {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, compareStates)
	return out
}

func compareStates(a, b bstate) int {
	return cmp.Or(
		cmp.Compare(a.last, b.last), cmp.Compare(boolBit(a.fresh), boolBit(b.fresh)),
		a.lo.cmp(b.lo), a.hi.cmp(b.hi),
		strings.Compare(a.pend, b.pend),
		cmp.Compare(a.pol.Capacity, b.pol.Capacity), cmp.Compare(a.pol.Rate, b.pol.Rate),
		cmp.Compare(boolBit(a.changed), boolBit(b.changed)), cmp.Compare(boolBit(a.reclaim), boolBit(b.reclaim)),
		cmp.Compare(a.gap.minRate, b.gap.minRate), cmp.Compare(a.gap.maxRate, b.gap.maxRate),
		cmp.Compare(a.gap.minCap, b.gap.minCap), cmp.Compare(a.gap.maxCap, b.gap.maxCap),
		cmp.Compare(a.tier, b.tier), strings.Compare(a.pols, b.pols),
	)
}

var hashSeed = maphash.MakeSeed()

// bucketModel is the porcupine model of one key whose tiers' policies
// start as initial (initial[0] is the key's initial tier; an assignment's
// step.tier and a policy change's step.tier index initial). It counts the
// steps it takes, and its fallbacks, in stats (which may be nil).
func bucketModel(stats *ModelStats, initial ...bucket.Policy) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return stateSet{initialState(initial)} },
		Step: func(state, input, _ any) (bool, any) {
			var all []bstate
			var fb fallbacks
			for _, s := range state.(stateSet) {
				all = append(all, s.next(input.(step), &fb)...)
			}
			stats.record(input.(step), fb)
			if len(all) == 0 {
				return false, nil
			}
			return true, newStateSet(all)
		},
		Equal: func(a, b any) bool { return slices.Equal(a.(stateSet), b.(stateSet)) },
		Hash: func(state any) uint64 {
			var h uint64
			for _, s := range state.(stateSet) {
				h = h*31 + maphash.Comparable(hashSeed, s)
			}
			return h
		},
		DescribeOperation: func(input, _ any) string { return input.(step).String() },
		DescribeState: func(state any) string {
			var parts []string
			for _, s := range state.(stateSet) {
				parts = append(parts, s.String())
			}
			return strings.Join(parts, " | ")
		},
		DescribeOperationMetadata: func(m any) string {
			if m == nil {
				return ""
			}
			return fmt.Sprint(m)
		},
	}
}
