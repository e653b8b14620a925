package checker

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// Windows checks the keys under sliding-window policies against the
// window's definition (bucket.DecideWindow): a decision at group time t
// counts every admission at a time a with t - a < W, admits iff that sum
// plus the cost is at most N, and answers remaining = max(0, N - the sum
// after it). The group time of a decision is its stamp (max of the
// leader's stamp and the group's high water, exactly the time the window
// was decided at), and group time never goes back in log order, so every
// admission with a smaller stamp came before a decision in its group's
// log, and only admissions with the same stamp may have come after it.
// Unlike the token-bucket checks, no clock slack enters for definite
// decisions: the README's "admissions of Δ more" for a leader whose clock
// is ahead is real time; in group time the window is exact.
//
// For every key that may be under a sliding window (and never under a
// token bucket: a key of both kinds is counted and left out), with the
// decisions settled as prepare settles them (a duplicate answer is the
// same decision, counted once; an info op a duplicate resolved is a
// decision), and W and N those of the answer (window_seconds, limit; an
// answer without window_seconds takes the shortest or longest W any
// window of the key's tiers may have then, whichever is sound):
//
//   - over-admission: for every stamp t of an admission, the cost of the
//     distinct admissions with stamps in (t - W, t] is at most N, the
//     largest limit answered by an admission at t (the last of them in the
//     log saw all the others). So at most N in any W, the README's bound.
//   - an admission at t: the admissions with stamps in (t - W, t), plus its
//     own cost, are at most its N.
//   - remaining: at most N minus the admissions with stamps in (t - W, t)
//     and its own, and at least N minus every admission with a stamp in
//     (t - W, t] and every operation of unknown outcome invoked before t +
//     slack; clamped at 0. An unknown one may be applied long after the
//     harness gave up on it (a paused leader reads the request when it
//     resumes, and stamps it then), so no end is assumed.
//   - a denial of a cost at most N: the admissions that may count (the
//     upper sum above) plus the cost must exceed N.
//   - window_seconds, when answered, is the W of a window that may be in
//     force during the operation (PolicyChanges checks the limit).
//
// Sound when the key's window is only ever emptied by expiry: a fill on
// raise of its tier empties it, so the upper-bound checks skip a decision
// whose window a fill change may fall in (counted), and an algorithm
// change or a reset would break them (the harness makes neither on window
// keys). Operations of unknown outcome only add admissions, so the
// upper-bound checks ignore them.
func Windows(h history.History, p Params) Result {
	r := newReport("window", p)
	c := newClock(h)
	if err := p.Default.Validate(); err != nil {
		r.fail("params: default policy: %v", err)
		return r.result()
	}
	slack := p.clockSlack(h)
	prep := prepare(h, p)
	timelines := map[string]timeline{}
	var st windowStats
	for _, kh := range prep.keys {
		kp := p.policiesOf(h, kh, timelines)
		windows, buckets := kp.kinds()
		switch {
		case !windows:
			continue
		case buckets:
			st.mixed++
			continue
		}
		st.keys++
		checkWindowKey(r, c, kh, kp, slack, &st)
	}
	r.set("keys", st.keys)
	r.set("mixed_keys_not_checked", st.mixed)
	r.set("decisions", st.decisions)
	r.set("admissions", st.admissions)
	r.set("denials", st.denials)
	r.set("admitted_cost", st.admitted)
	r.set("windows_checked", st.windows)
	r.set("unknown_ops", st.unknown)
	r.set("skipped_across_fill", st.acrossFill)
	r.set("without_limit", st.noLimit)
	r.set("without_window_seconds", st.noWindow)
	r.set("worst_window_ratio", st.worst)
	r.set("over_admitting_windows", st.over)
	r.set("wrong_remaining", st.wrongRemaining)
	r.set("denied_with_room", st.deniedWithRoom)
	r.set("wrong_window_seconds", st.wrongWindow)
	return r.result()
}

type windowStats struct {
	keys, mixed, decisions, admissions, denials, windows, unknown int
	acrossFill, noLimit, noWindow                                 int
	over, wrongRemaining, deniedWithRoom, wrongWindow             int
	admitted                                                      int64
	worst                                                         float64
}

// stampSums answers sums of admitted cost over ranges of stamps.
type stampSums struct {
	stamps []int64 // sorted
	prefix []int64 // prefix[i]: cost of stamps[:i]
}

func newStampSums(adm []history.Op) stampSums {
	slices.SortStableFunc(adm, func(a, b history.Op) int { return cmp.Compare(a.Stamp, b.Stamp) })
	s := stampSums{stamps: make([]int64, len(adm)), prefix: make([]int64, len(adm)+1)}
	for i, op := range adm {
		s.stamps[i] = op.Stamp
		s.prefix[i+1] = s.prefix[i] + op.Cost
	}
	return s
}

// upTo is the cost of stamps <= t (strict: < t).
func (s stampSums) upTo(t int64, strict bool) int64 {
	i := sort.Search(len(s.stamps), func(i int) bool {
		if strict {
			return s.stamps[i] >= t
		}
		return s.stamps[i] > t
	})
	return s.prefix[i]
}

// in is the cost of stamps in (lo, hi] (hiOpen: (lo, hi)).
func (s stampSums) in(lo, hi int64, hiOpen bool) int64 {
	return s.upTo(hi, hiOpen) - s.upTo(lo, false)
}

func checkWindowKey(r *report, c clock, kh *keyHistory, kp keyPolicies, slack int64, st *windowStats) {
	var adm []history.Op
	for _, d := range kh.decisions {
		if d.op.Allowed && d.op.Cost > 0 {
			adm = append(adm, d.op)
		}
	}
	sums := newStampSums(slices.Clone(adm))
	type span struct{ from, to, cost int64 }
	var unknown []span
	for _, d := range kh.unknown {
		if d.op.Cost > 0 {
			unknown = append(unknown, span{d.op.Invoke - slack, math.MaxInt64, d.op.Cost})
		}
	}
	st.unknown += len(unknown)
	// mayCount is what the ops of unknown outcome may add to (lo, hi].
	mayCount := func(lo, hi int64) int64 {
		var n int64
		for _, u := range unknown {
			if u.from <= hi && u.to > lo {
				n += u.cost
			}
		}
		return n
	}
	// windowsOf returns the shortest and longest W op may have been
	// decided under, and whether its answer names one that cannot be.
	windowsOf := func(op history.Op) (short, long int64, wrong bool) {
		short, long = math.MaxInt64, 0
		named := false
		for _, pol := range kp.candidates(op.Invoke, op.Complete) {
			if isWindow(pol) {
				short, long = min(short, pol.Window), max(long, pol.Window)
				named = named || op.WindowSeconds*bucket.Second == pol.Window
			}
		}
		switch {
		case op.WindowSeconds == 0:
			return short, long, false
		case !named:
			return short, long, true
		}
		w := op.WindowSeconds * bucket.Second
		return w, w, false
	}
	fillIn := func(lo, hi int64) bool { return kp.fillsIn(lo, hi, slack) > 0 }

	// Over-admission: every stamp of an admission, against the largest
	// limit answered at it.
	byStamp := map[int64][]history.Op{}
	for _, op := range adm {
		byStamp[op.Stamp] = append(byStamp[op.Stamp], op)
	}
	for _, t := range sortedStamps(byStamp) {
		ops := byStamp[t]
		var n int64
		w := int64(math.MaxInt64)
		for _, op := range ops {
			short, _, _ := windowsOf(op)
			n, w = max(n, op.Limit), min(w, short)
		}
		if n == 0 || w == math.MaxInt64 {
			continue
		}
		if fillIn(t-w, t) {
			st.acrossFill++
			continue
		}
		st.windows++
		sum := sums.in(t-w, t, false)
		st.worst = max(st.worst, float64(sum)/float64(n))
		if sum > n {
			st.over++
			r.fail("key %q (tier %q): %d admitted with stamps in (%s, %s] (%s), above the window's limit %d; the last admission: %s",
				kh.key, kh.tier, sum, c.at(t-w), c.at(t), dur(w), n, describe(c, ops[len(ops)-1]))
		}
	}

	for _, d := range kh.decisions {
		op := d.op
		st.decisions++
		if op.Allowed && op.Cost > 0 {
			st.admissions++
			st.admitted += op.Cost
		} else if !op.Allowed {
			st.denials++
		}
		short, long, wrong := windowsOf(op)
		if op.WindowSeconds == 0 {
			st.noWindow++
		}
		if wrong {
			st.wrongWindow++
			r.fail("key %q: %s: decided under a window of %ds, which no policy of the key's tiers has then", kh.key, describe(c, op), op.WindowSeconds)
		}
		if op.Limit == 0 || long == 0 {
			st.noLimit++
			continue
		}
		n, t, own := op.Limit, op.Stamp, int64(0)
		if op.Allowed {
			own = op.Cost
		}
		// What certainly counts (stamps before t, and its own cost), and
		// what may (every admission at t too, and the unknown ones).
		if !fillIn(t-short, t) {
			lo := sums.in(t-short, t, true) + own
			switch {
			case op.Allowed && lo > n:
				st.wrongRemaining++
				r.fail("key %q: %s: admitted, but %d was admitted with earlier stamps in the window of %s before it, and its cost makes %d, above the limit %d",
					kh.key, describe(c, op), lo-own, dur(short), lo, n)
			case op.Remaining > max(0, n-lo):
				st.wrongRemaining++
				r.fail("key %q: %s: remaining %d, but at least %d of the limit %d counts in the window of %s ending at its stamp",
					kh.key, describe(c, op), op.Remaining, lo, n, dur(short))
			}
		}
		hi := sums.in(t-long, t, false) + mayCount(t-long, t)
		switch {
		case !op.Allowed && op.Cost <= n && hi+op.Cost <= n:
			st.deniedWithRoom++
			r.fail("key %q: %s: denied, but at most %d of the limit %d can count in the window of %s ending at its stamp",
				kh.key, describe(c, op), hi, n, dur(long))
		case op.Remaining < max(0, n-hi):
			st.wrongRemaining++
			r.fail("key %q: %s: remaining %d, but at most %d of the limit %d can count in the window of %s ending at its stamp",
				kh.key, describe(c, op), op.Remaining, hi, n, dur(long))
		}
	}
}

func sortedStamps(m map[int64][]history.Op) []int64 {
	out := make([]int64, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}
