package checker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// OverAdmission checks ARCHITECTURE §3's bound in the group time the
// decisions carry: for one key, the tokens admitted by decisions whose
// stamps lie in a window of length W are at most C + r·W, with C and r the
// largest capacity and rate that may be in force during the window. A key
// whose tier changes (History.Assignments) may be under the policy of any
// tier it may be in: C and r are the largest over all of them.
//
// Why it holds for a correct cluster: the group applies a key's decisions
// in log order with non-decreasing group times (the stamps the API
// returns); the balance at the first decision of the window is at most C,
// and each later one refills at most r × the group time since the previous
// one (caps and clamps only remove tokens; raising a capacity adds none).
// The real-time form C + r·(T + Δ) of the README follows, since every
// stamp is its leader's clock (or an earlier stamp) and those clocks are
// within the injected offsets of real time; in group time no ε is needed.
//
// Each admission is counted at its stamp, a point, however long its
// operation took (retried across a failover, say): the Stamps checker has
// already checked each stamp against its operation's real-time interval,
// widened by the injected offsets, so a server cannot move its decisions
// around without failing there. An operation whose outcome stays unknown
// counts as admitted: it may have been applied, and its group time lies in
// [Invoke - slack, Complete + slack] over its attempts (it was stamped
// while one of its attempts was in flight, and group time never runs ahead
// of the clock of the leader that stamps), so it counts in every window
// that holds that whole interval. Every window that matters runs from the
// earliest point of one item to the latest of another, and all of them are
// checked (O(n²) in the key's admissions), which covers every W at once.
// The same scan over definite admissions alone is reported as well
// ("definite"), so a failure caused only by unknown outcomes shows as such.
//
// A policy change with on_raise fill may refill the key to its capacity
// (a raise refills every client of the tier once, where the change is
// applied): each one that may be applied at a group time inside a window
// (its [invoke - slack, ack + slack], unbounded if not acked) adds C to
// that window's bound. Keys that may be under a sliding window are left
// to Windows (a window's bound is N per W, not C + r·W).
func OverAdmission(h history.History, p Params) Result {
	r := newReport("over-admission", p)
	c := newClock(h)
	if err := p.Default.Validate(); err != nil {
		r.fail("params: default policy: %v", err)
		return r.result()
	}
	slack := p.clockSlack(h)
	prep := prepare(h, p)
	timelines := map[string]timeline{}
	var (
		admitted, possible        int64
		worst                     window
		worstRatio, worstDefinite float64
		violating, onlyUnknown    int
		wholeRatio                float64
		haveWorst, have           bool
	)
	windowKeys := 0
	for _, kh := range prep.keys {
		kp := p.policiesOf(h, kh, timelines)
		if windows, _ := kp.kinds(); windows {
			windowKeys++
			continue
		}
		var definite, all []item
		for _, d := range kh.decisions {
			if d.op.Allowed && d.op.Cost > 0 {
				definite = append(definite, item{from: d.op.Stamp, to: d.op.Stamp, cost: d.op.Cost})
				admitted += d.op.Cost
			}
		}
		all = slices.Clone(definite)
		for _, d := range kh.unknown {
			if d.op.Cost > 0 {
				all = append(all, item{from: d.op.Invoke - slack, to: d.op.Complete + slack, cost: d.op.Cost, unknown: true})
				possible += d.op.Cost
			}
		}
		if len(all) == 0 {
			continue
		}
		s := scanWindows(all, kp, slack)
		if s.over {
			violating++
			w := s.worst
			why := ""
			if w.unknown > 0 {
				why = fmt.Sprintf(" (%d of them unknown, counted as admitted)", w.unknown)
			}
			fills := ""
			if w.fills > 0 {
				fills = fmt.Sprintf(" + %d fills × C", w.fills)
			}
			r.fail("key %q (tier %q): %d tokens admitted%s with stamps in [%s, %s] (%s), bound %s = C %d + r %s/s × %s%s; excess %s",
				kh.key, kh.tier, w.admitted, why, c.at(w.from), c.at(w.to), dur(w.to-w.from), w.bound,
				w.capacity, bucket.FormatRate(w.rate), dur(w.to-w.from), fills, w.excess())
		}
		if !haveWorst || s.worst.excessF > worst.excessF {
			worst, haveWorst = s.worst, true
		}
		worstRatio = max(worstRatio, s.ratio)
		if !have || s.whole.ratio() > wholeRatio {
			wholeRatio, have = s.whole.ratio(), true
		}
		switch {
		case len(definite) == 0:
			if s.over {
				onlyUnknown++
			}
		case len(definite) < len(all):
			d := scanWindows(definite, kp, slack)
			worstDefinite = max(worstDefinite, d.ratio)
			if s.over && !d.over {
				onlyUnknown++
			}
		default:
			worstDefinite = max(worstDefinite, s.ratio)
		}
	}
	r.set("keys", len(prep.keys)-windowKeys)
	r.set("window_keys_left_to_windows", windowKeys)
	r.set("clock_slack_ms", ms(slack))
	r.set("admitted_tokens", admitted)
	r.set("unknown_tokens", possible)
	r.set("violating_keys", violating)
	r.set("violating_keys_only_with_unknown", onlyUnknown)
	r.set("worst_excess_tokens", worst.excessF)
	r.set("worst_excess_window_ms", ms(worst.to-worst.from))
	r.set("worst_ratio", worstRatio)
	r.set("worst_ratio_definite", worstDefinite)
	r.set("whole_run_worst_ratio", wholeRatio)
	return r.result()
}

// item is one admission: cost tokens decided at a group time somewhere in
// [from, to] (from == to for a definite admission, at its stamp); unknown
// marks an operation whose outcome is unknown, counted as admitted.
type item struct {
	from, to, cost int64
	unknown        bool
}

// window is one real-time window and what was admitted in it.
type window struct {
	from, to       int64
	admitted       int64
	unknown        int64 // of admitted, the tokens of unknown operations
	capacity, rate int64
	fills          int // fill changes that may refill the key inside the window
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
// The policies that may be in force are looked up over the window widened
// by slack on each side (group time against the harness's real time).
func scanWindows(items []item, kp keyPolicies, slack int64) scan {
	byFrom := slices.Clone(items)
	slices.SortStableFunc(byFrom, func(a, b item) int { return cmp.Compare(a.from, b.from) })
	byTo := slices.Clone(items)
	slices.SortStableFunc(byTo, func(a, b item) int { return cmp.Compare(a.to, b.to) })
	static := kp.static()
	c0, r0 := kp.largest(byFrom[0].from-slack, byTo[len(byTo)-1].to+slack)
	eval := func(from, to, admitted, unknown int64) window {
		cp, rt := c0, r0
		if !static {
			cp, rt = kp.largest(from-slack, to+slack)
		}
		w := window{from: from, to: to, admitted: admitted, unknown: unknown, capacity: cp, rate: rt}
		if !static {
			w.fills = kp.fillsIn(from, to, slack)
		}
		span := to - from
		w.excessF = float64(admitted) - (float64(int64(1+w.fills)*cp) + float64(rt)/bucket.Scale*float64(span)/1e9)
		return w
	}
	exact := func(w *window) bool {
		w.bound = tokens(int64(1+w.fills) * w.capacity).add(refillOf(w.to-w.from, w.rate))
		return tokens(w.admitted).cmp(w.bound) > 0
	}
	var s scan
	first := true
	for i, start := range byFrom {
		if i > 0 && start.from == byFrom[i-1].from {
			continue // the earlier start saw the same windows
		}
		var sum, unknown int64
		for _, it := range byTo {
			if it.from < start.from {
				continue
			}
			sum += it.cost
			if it.unknown {
				unknown += it.cost
			}
			w := eval(start.from, it.to, sum, unknown)
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
	var total, unknown int64
	for _, it := range items {
		total += it.cost
		if it.unknown {
			unknown += it.cost
		}
	}
	s.whole = eval(byFrom[0].from, byTo[len(byTo)-1].to, total, unknown)
	exact(&s.whole)
	return s
}
