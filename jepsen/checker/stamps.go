package checker

import (
	"cmp"
	"slices"

	"github.com/quorate/quorate/jepsen/history"
)

// Stamps checks the server's decision stamps against the harness clock:
//
//   - every ok answer's stamp lies in [Invoke - slack, Complete + slack],
//     slack = Params.ClockSlack (default: the largest injected offset). A
//     stamp is the group time max(leader clock, high water); the leader
//     reads its clock after the request arrives and the high water is an
//     earlier stamp, so with every clock within ±slack of real time both
//     bounds hold. A duplicate answer carries the original stamp, so its
//     interval starts at the earliest attempt of its request id.
//   - per key, stamps never go back in real time: if decision A completed
//     before op B (a decision or a read) was invoked, A.Stamp <= B.Stamp.
//     Group time is monotonic in log order and B's entry follows A's. A
//     read does not advance the group time, so reads are only ever the
//     later op of a pair, and duplicate answers are left out of pairs.
func Stamps(h history.History, p Params) Result {
	r := newReport("stamps", p)
	c := newClock(h)
	slack := p.clockSlack(h)
	prep := prepare(h, p)
	firstInvoke := map[[2]string]int64{}
	for _, op := range h.Ops {
		if op.RequestID == "" {
			continue
		}
		k := [2]string{op.Key, op.RequestID}
		if t, ok := firstInvoke[k]; !ok || op.Invoke < t {
			firstInvoke[k] = op.Invoke
		}
	}
	outside, back, checked := 0, 0, 0
	var worstEarly, worstLate int64 // beyond the slack
	for _, op := range h.Ops {
		if op.Outcome != history.OutcomeOK {
			continue
		}
		checked++
		from := op.Invoke
		if op.Duplicate {
			from = firstInvoke[[2]string{op.Key, op.RequestID}]
		}
		switch {
		case op.Stamp < from-slack:
			outside++
			worstEarly = max(worstEarly, from-slack-op.Stamp)
			r.fail("key %q: stamp %s is %s before the op was invoked, beyond the clock slack %s: %s",
				op.Key, c.at(op.Stamp), dur(from-op.Stamp), dur(slack), describe(c, op))
		case op.Stamp > op.Complete+slack:
			outside++
			worstLate = max(worstLate, op.Stamp-op.Complete-slack)
			r.fail("key %q: stamp %s is %s after the op completed, beyond the clock slack %s: %s",
				op.Key, c.at(op.Stamp), dur(op.Stamp-op.Complete), dur(slack), describe(c, op))
		}
	}
	for _, kh := range prep.keys {
		// Earlier decisions by completion; later ops by invoke.
		earlier := slices.Clone(kh.decisions)
		later := append(slices.Clone(kh.decisions), kh.reads...)
		slices.SortStableFunc(earlier, func(a, b decision) int { return cmp.Compare(a.op.Complete, b.op.Complete) })
		slices.SortStableFunc(later, func(a, b decision) int { return cmp.Compare(a.op.Invoke, b.op.Invoke) })
		var best *decision // the completed decision with the largest stamp so far
		i := 0
		for _, b := range later {
			for i < len(earlier) && earlier[i].op.Complete < b.op.Invoke {
				if best == nil || earlier[i].op.Stamp > best.op.Stamp {
					best = &earlier[i]
				}
				i++
			}
			if best != nil && b.op.Stamp < best.op.Stamp {
				back++
				r.fail("key %q: stamp went back by %s: %s completed before %s was invoked",
					kh.key, dur(best.op.Stamp-b.op.Stamp), describe(c, best.op), describe(c, b.op))
			}
		}
	}
	r.set("checked", checked)
	r.set("clock_slack_ms", ms(slack))
	r.set("outside_interval", outside)
	r.set("worst_early_beyond_slack_ms", ms(worstEarly))
	r.set("worst_late_beyond_slack_ms", ms(worstLate))
	r.set("went_back", back)
	return r.result()
}
