package checker

import (
	"cmp"
	"slices"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// OverAdmission checks DESIGN §3's bound: over any real-time window of
// length W, one key is admitted at most C + r·(W + ε) tokens, with C and r
// the largest capacity and rate that may be in force during the window and
// ε = Params.Skew. A key whose tier changes (History.Assignments) may be
// under the policy of any tier it may be in during the window: C and r are
// the largest over all of them (the argument below holds for any sequence
// of policies, since a new policy clamps to its own capacity and adds no
// tokens). Why it holds for a correct cluster: the balance before
// the first decision inside a window is at most C (raising a capacity adds
// nothing; a forgotten bucket restarts at most full), and every later one
// refills at most r × the group time elapsed since the previous decision;
// group time moves at most W + ε while real time moves W, since every stamp
// is its leader's clock (or an earlier stamp) and leaders' clocks differ by
// at most ε.
//
// Window edges: an admission is counted in a window only if its whole
// [Invoke, Complete] lies inside it, because only then is its decision
// certainly inside (counting ops that merely overlap would blame a window
// for decisions made outside it and raise false alarms). Every window that
// matters is then [Invoke of one admitted op, Complete of another], and all
// of them are checked, which covers every W at once, the whole run
// included; O(n²) in the key's admitted ops.
//
// Info ops: the verdict counts only definite admissions (ok and allowed,
// including info ops a duplicate answer resolved as allowed), so it never
// fails on an op that was not applied. The same scan is reported counting
// every unresolved info op as admitted within its recorded interval, as an
// upper estimate ("with_info"); it is not a verdict, since an info op may
// not have been applied at all (or may have been applied after the harness
// gave up on it).
func OverAdmission(h history.History, p Params) Result {
	r := newReport("over-admission", p)
	c := newClock(h)
	if err := p.Default.Validate(); err != nil {
		r.fail("params: default policy: %v", err)
		return r.result()
	}
	skew := p.skew(h)
	prep := prepare(h, p)
	timelines := map[string]timeline{}
	var (
		admitted, possible             int64
		worst, worstInfo               window
		worstRatio, worstRatioInfo     float64
		violating, overWithInfo        int
		wholeRatio                     float64
		haveWorst, haveWorstInfo, have bool
	)
	for _, kh := range prep.keys {
		kp := p.policiesOf(h, kh, timelines)
		var definite, withInfo []item
		for _, d := range kh.decisions {
			if d.op.Allowed && d.op.Cost > 0 {
				definite = append(definite, item{from: d.op.Invoke, to: d.op.Complete, cost: d.op.Cost})
				admitted += d.op.Cost
			}
		}
		withInfo = slices.Clone(definite)
		for _, d := range kh.unknown {
			if d.op.Cost > 0 {
				withInfo = append(withInfo, item{from: d.op.Invoke, to: d.op.Complete, cost: d.op.Cost})
				possible += d.op.Cost
			}
		}
		if len(definite) > 0 {
			s := scanWindows(definite, kp, skew)
			if s.over {
				violating++
				w := s.worst
				r.fail("key %q (tier %q): %d tokens admitted in [%s, %s] (%s), bound %s = C %d + r %s/s × (%s + ε %s); excess %s",
					kh.key, kh.tier, w.admitted, c.at(w.from), c.at(w.to), dur(w.to-w.from), w.bound,
					w.capacity, bucket.FormatRate(w.rate), dur(w.to-w.from), dur(skew), w.excess())
			}
			if !haveWorst || s.worst.excessF > worst.excessF {
				worst, haveWorst = s.worst, true
			}
			worstRatio = max(worstRatio, s.ratio)
			if !have || s.whole.ratio() > wholeRatio {
				wholeRatio, have = s.whole.ratio(), true
			}
		}
		if len(withInfo) > len(definite) {
			s := scanWindows(withInfo, kp, skew)
			if s.over {
				overWithInfo++
			}
			if !haveWorstInfo || s.worst.excessF > worstInfo.excessF {
				worstInfo, haveWorstInfo = s.worst, true
			}
			worstRatioInfo = max(worstRatioInfo, s.ratio)
		}
	}
	if !haveWorstInfo {
		worstInfo, worstRatioInfo = worst, worstRatio
	}
	r.set("keys", len(prep.keys))
	r.set("skew_ms", ms(skew))
	r.set("admitted_tokens", admitted)
	r.set("info_tokens", possible)
	r.set("violating_keys", violating)
	r.set("worst_excess_tokens", worst.excessF)
	r.set("worst_excess_window_ms", ms(worst.to-worst.from))
	r.set("worst_ratio", worstRatio)
	r.set("whole_run_worst_ratio", wholeRatio)
	r.set("worst_excess_with_info_tokens", worstInfo.excessF)
	r.set("worst_ratio_with_info", worstRatioInfo)
	r.set("keys_over_with_info", overWithInfo)
	return r.result()
}

// item is one admission: cost tokens decided somewhere in [from, to].
type item struct{ from, to, cost int64 }

// window is one real-time window and what was admitted in it.
type window struct {
	from, to       int64
	admitted       int64
	capacity, rate int64
	bound          amount
	excessF        float64
}

func (w window) excess() string { return tokens(w.admitted).sub(w.bound).String() }

// ratio is admitted / bound, approximately.
func (w window) ratio() float64 {
	return float64(w.admitted) / (float64(w.admitted) - w.excessF)
}

type scan struct {
	worst window // largest admitted - bound
	ratio float64
	whole window
	over  bool // some window exceeds its bound (exact)
}

// scanWindows checks every window [from of an item, to of an item] against
// the bound and returns the worst one, the worst ratio and the whole span.
func scanWindows(items []item, kp keyPolicies, skew int64) scan {
	byFrom := slices.Clone(items)
	slices.SortStableFunc(byFrom, func(a, b item) int { return cmp.Compare(a.from, b.from) })
	byTo := slices.Clone(items)
	slices.SortStableFunc(byTo, func(a, b item) int { return cmp.Compare(a.to, b.to) })
	static := kp.static()
	c0, r0 := kp.largest(byFrom[0].from, byTo[len(byTo)-1].to)
	eval := func(from, to, admitted int64) window {
		cp, rt := c0, r0
		if !static {
			cp, rt = kp.largest(from, to)
		}
		w := window{from: from, to: to, admitted: admitted, capacity: cp, rate: rt}
		span := to - from + skew
		w.excessF = float64(admitted) - (float64(cp) + float64(rt)/bucket.Scale*float64(span)/1e9)
		return w
	}
	exact := func(w *window) bool {
		w.bound = tokens(w.capacity).add(refillOf(w.to-w.from+skew, w.rate))
		return tokens(w.admitted).cmp(w.bound) > 0
	}
	var s scan
	first := true
	for i, start := range byFrom {
		if i > 0 && start.from == byFrom[i-1].from {
			continue // the earlier start saw the same windows
		}
		var sum int64
		for _, it := range byTo {
			if it.from < start.from {
				continue
			}
			sum += it.cost
			w := eval(start.from, it.to, sum)
			if r := w.ratio(); r > s.ratio {
				s.ratio = r
			}
			// The float excess picks the worst window; the exact bound
			// decides whether a window is over.
			over := w.excessF > -1e-6-1e-9*float64(sum) && exact(&w)
			switch {
			case over && !s.over:
				s.over, s.worst, first = true, w, false
			case first || (w.excessF > s.worst.excessF && (over || !s.over)):
				exact(&w)
				s.worst, first = w, false
			}
		}
	}
	var total int64
	for _, it := range items {
		total += it.cost
	}
	s.whole = eval(byFrom[0].from, byTo[len(byTo)-1].to, total)
	exact(&s.whole)
	return s
}
