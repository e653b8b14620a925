package checker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorate/quorate/jepsen/history"
)

// Availability measures, over allow and read ops, the fraction that got an
// ok answer among those invoked during a fault (inside some nemesis
// interval) and among the others, and how long each key took to recover
// after the last fault was healed: the time from the last nemesis stop, or
// from the key's first request after it if that came later (a key nobody
// asked about for a while was not unavailable), to the first ok answer
// completed after it. A key that had ops after the heal but no ok answer
// after it has not recovered.
//
// Every op is one attempt (one HTTP request: a retry, a repeat or a
// resolve probe is a record of its own), so these are decisions answered
// per attempt, not per eventually successful operation. The figure during
// faults is also given per nemesis kind (the Name of the nemesis events:
// kill, partition-leader, clock-bump, ...): attempts_during_<kind>,
// answered_during_<kind> and availability_during_<kind>, an attempt
// counting once for every kind whose interval contains its invoke (and
// once in the overall figure, however many contain it). For each kind,
// unanswered_p50_ms_during_<kind> and unanswered_max_ms_during_<kind> give
// how long its unanswered attempts took: a node that cannot decide and
// says so at once costs its caller little, one that holds the request
// until the caller's deadline costs the deadline. With Params.NodeIDs,
// to_faulted_during_<kind> and answered_to_faulted_during_<kind> count the
// attempts sent to a node the fault hit (faultedNodes): how well the caller
// steers around it.
//
// The same figures per call (calls_during_faults, calls_decided_during_faults,
// call_availability_during_faults, and _outside_faults) count a caller's
// operation once: all attempts of one (process, key, request id), the
// first attempt's invoke placing it during a fault or outside, decided if
// any attempt was answered ok. A repeat or resolve probe is not a call of
// its own, and attempts without a request id (the accounting keys' raw,
// never retried requests) are not calls of the client: they count in the
// per-attempt figures only. That is what a service calling the Go client
// sees.
//
// It fails if a key did not recover, or took longer than
// Params.MaxRecovery. Availability during faults is reported, not judged:
// refusing (503) without a quorum is the contract.
func Availability(h history.History, p Params) Result {
	r := newReport("availability", p)
	c := newClock(h)
	limit := int64(p.MaxRecovery)
	if limit == 0 {
		limit = int64(DefaultMaxRecovery)
	}
	ivs := h.NemesisIntervals()
	var lastHeal int64
	healed, open := false, 0
	for _, iv := range ivs {
		if iv.Open {
			open++
			continue
		}
		if !healed || iv.Stop > lastHeal {
			lastHeal, healed = iv.Stop, true
		}
	}
	var during, duringOK, outside, outsideOK int
	type kindCount struct {
		attempts, answered int
		unanswered         []int64 // latencies of the attempts not answered ok
		toFaulted          int     // attempts sent to a node the fault hit
		answeredFaulted    int
	}
	var allIDs []string
	for _, id := range p.NodeIDs {
		if !slices.Contains(allIDs, id) {
			allIDs = append(allIDs, id)
		}
	}
	hit := make([][]string, len(ivs))
	for i, iv := range ivs {
		hit[i] = faultedNodes(iv, allIDs)
	}
	kinds := map[string]*kindCount{}
	for _, iv := range ivs {
		if kinds[iv.Name] == nil {
			kinds[iv.Name] = &kindCount{}
		}
	}
	var seen []string
	type rec struct {
		tried     bool
		recovered bool
		since     int64 // invoke of the first op still running at or invoked after the heal
		at        int64 // first ok completion after the heal
	}
	recs := map[string]*rec{}
	for _, op := range h.Ops {
		if op.Kind != history.KindAllow && op.Kind != history.KindRead {
			continue
		}
		ok := op.Outcome == history.OutcomeOK
		inFault := slices.ContainsFunc(ivs, func(iv history.Interval) bool { return iv.Contains(op.Invoke) })
		if inFault {
			during++
			if ok {
				duringOK++
			}
			seen = seen[:0]
			for i, iv := range ivs {
				if !iv.Contains(op.Invoke) || slices.Contains(seen, iv.Name) {
					continue
				}
				seen = append(seen, iv.Name)
				k := kinds[iv.Name]
				k.attempts++
				if ok {
					k.answered++
				} else {
					k.unanswered = append(k.unanswered, op.Complete-op.Invoke)
				}
				if id, known := p.NodeIDs[op.Node]; known && slices.Contains(hit[i], id) {
					k.toFaulted++
					if ok {
						k.answeredFaulted++
					}
				}
			}
		} else {
			outside++
			if ok {
				outsideOK++
			}
		}
		if !healed {
			continue
		}
		k := recs[op.Key]
		if k == nil {
			k = &rec{}
			recs[op.Key] = k
		}
		if op.Invoke >= lastHeal || op.Complete >= lastHeal {
			if !k.tried || op.Invoke < k.since {
				k.since = op.Invoke
			}
			k.tried = true
		}
		if ok && op.Complete >= lastHeal && (!k.recovered || op.Complete < k.at) {
			k.recovered, k.at = true, op.Complete
		}
	}
	var times []int64
	notRecovered := 0
	for _, key := range sortedKeys(recs) {
		k := recs[key]
		switch {
		case k.recovered:
			d := k.at - max(lastHeal, k.since)
			times = append(times, d)
			if limit > 0 && d > limit {
				r.fail("key %q: first ok answer %s after the last heal at %s, longer than %s", key, dur(d), c.at(lastHeal), dur(limit))
			}
		case k.tried:
			notRecovered++
			r.fail("key %q: no ok answer after the last heal at %s", key, c.at(lastHeal))
		}
	}
	slices.Sort(times)
	frac := func(ok, n int) float64 {
		if n == 0 {
			return 1
		}
		return float64(ok) / float64(n)
	}
	r.set("faults", len(ivs))
	r.set("faults_never_healed", open)
	r.set("ops_during_faults", during)
	r.set("ok_during_faults", duringOK)
	r.set("availability_during_faults", frac(duringOK, during))
	for _, name := range sortedKeys(kinds) {
		k := kinds[name]
		r.set("attempts_during_"+name, k.attempts)
		r.set("answered_during_"+name, k.answered)
		r.set("availability_during_"+name, frac(k.answered, k.attempts))
		if p.NodeIDs != nil {
			r.set("to_faulted_during_"+name, k.toFaulted)
			r.set("answered_to_faulted_during_"+name, k.answeredFaulted)
		}
		if len(k.unanswered) > 0 {
			slices.Sort(k.unanswered)
			r.set("unanswered_p50_ms_during_"+name, ms(k.unanswered[len(k.unanswered)/2]))
			r.set("unanswered_max_ms_during_"+name, ms(k.unanswered[len(k.unanswered)-1]))
		}
	}
	cd, cdOK, co, coOK, within := callsDecided(h, ivs)
	r.set("calls_during_faults", cd)
	r.set("calls_decided_during_faults", cdOK)
	for i, lim := range callLimits {
		r.set(fmt.Sprintf("calls_decided_within_%ds_during_faults", lim), within[i])
	}
	r.set("call_availability_during_faults", frac(cdOK, cd))
	r.set("calls_outside_faults", co)
	r.set("calls_decided_outside_faults", coOK)
	r.set("call_availability_outside_faults", frac(coOK, co))
	r.set("ops_outside_faults", outside)
	r.set("ok_outside_faults", outsideOK)
	r.set("availability_outside_faults", frac(outsideOK, outside))
	r.set("keys_not_recovered", notRecovered)
	if len(times) > 0 {
		r.set("recovery_max_ms", ms(times[len(times)-1]))
		r.set("recovery_median_ms", ms(times[len(times)/2]))
		r.set("recovery_first_ms", ms(times[0]))
	}
	if limit > 0 {
		r.set("max_recovery_ms", ms(limit))
	}
	return r.result()
}

// callLimits are the deadlines, in seconds, of the per-call figures
// calls_decided_within_<n>s_during_faults: how many calls during faults a
// caller with that deadline would have seen decided (the Go client's
// default is 2 s).
var callLimits = []int{1, 2}

// callsDecided counts the allow calls (see Availability) invoked during a
// fault and outside, and of each how many were decided; within[i] counts
// the calls during faults decided no later than callLimits[i] seconds
// after their first attempt.
func callsDecided(h history.History, ivs []history.Interval) (during, duringOK, outside, outsideOK int, within []int) {
	type call struct {
		process    int
		key, reqID string
	}
	type state struct {
		first   int64
		decided bool
		at      int64 // completion of the first ok attempt
	}
	calls := map[call]*state{}
	var order []call
	for _, op := range h.Ops {
		if op.Kind != history.KindAllow || op.Probe != "" || op.RequestID == "" {
			continue
		}
		k := call{op.Process, op.Key, op.RequestID}
		st := calls[k]
		if st == nil {
			st = &state{first: op.Invoke}
			calls[k] = st
			order = append(order, k)
		}
		st.first = min(st.first, op.Invoke)
		if op.Outcome == history.OutcomeOK && (!st.decided || op.Complete < st.at) {
			st.decided, st.at = true, op.Complete
		}
	}
	within = make([]int, len(callLimits))
	for _, k := range order {
		st := calls[k]
		inFault := slices.ContainsFunc(ivs, func(iv history.Interval) bool { return iv.Contains(st.first) })
		switch {
		case inFault:
			during++
			if st.decided {
				duringOK++
			}
			for i, lim := range callLimits {
				if st.decided && st.at-st.first <= int64(lim)*int64(time.Second) {
					within[i]++
				}
			}
		default:
			outside++
			if st.decided {
				outsideOK++
			}
		}
	}
	return during, duringOK, outside, outsideOK, within
}

// faultedNodes returns the ids of the nodes a fault hit, as its start
// event's detail names them: "nodes" (killed, paused, stopped: a
// comma-separated list) or "node" (a skewed clock), or, for a partition
// ("cut": pairs "a|b" that cannot talk), the nodes cut off from every
// majority, i.e. in a connected part of at most half of all (the ids of
// all nodes). Nil if the detail says none.
func faultedNodes(iv history.Interval, all []string) []string {
	if v := iv.Detail["nodes"]; v != "" {
		return strings.Split(v, ",")
	}
	if v := iv.Detail["node"]; v != "" {
		return []string{v}
	}
	cut := iv.Detail["cut"]
	if cut == "" || len(all) == 0 {
		return nil
	}
	blocked := map[[2]string]bool{}
	for _, pair := range strings.Split(cut, ",") {
		a, b, ok := strings.Cut(pair, "|")
		if ok {
			blocked[[2]string{a, b}], blocked[[2]string{b, a}] = true, true
		}
	}
	ids := slices.Sorted(slices.Values(all))
	part := map[string]int{}
	var sizes []int
	for _, start := range ids {
		if _, done := part[start]; done {
			continue
		}
		p := len(sizes)
		sizes = append(sizes, 0)
		stack := []string{start}
		part[start] = p
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			sizes[p]++
			for _, y := range ids {
				if _, done := part[y]; !done && !blocked[[2]string{x, y}] {
					part[y] = p
					stack = append(stack, y)
				}
			}
		}
	}
	var out []string
	for _, id := range ids {
		if 2*sizes[part[id]] <= len(ids) {
			out = append(out, id)
		}
	}
	return out
}
