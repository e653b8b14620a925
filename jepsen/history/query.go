package history

import (
	"cmp"
	"fmt"
	"slices"
)

// OpsByKey groups the operations by Key. Each group keeps the order of
// h.Ops.
func (h History) OpsByKey() map[string][]Op {
	by := make(map[string][]Op)
	for _, op := range h.Ops {
		by[op.Key] = append(by[op.Key], op)
	}
	return by
}

// Keys returns the distinct keys of h.Ops, sorted.
func (h History) Keys() []string {
	seen := make(map[string]bool)
	var keys []string
	for _, op := range h.Ops {
		if !seen[op.Key] {
			seen[op.Key] = true
			keys = append(keys, op.Key)
		}
	}
	slices.Sort(keys)
	return keys
}

// Span returns the earliest and latest harness time in h (op invokes and
// completions, event, policy and assignment times), or 0, 0 for an empty history.
func (h History) Span() (start, end int64) {
	first := true
	see := func(t int64) {
		if t == 0 {
			return
		}
		if first {
			start, end, first = t, t, false
			return
		}
		start, end = min(start, t), max(end, t)
	}
	for _, op := range h.Ops {
		see(op.Invoke)
		see(op.Complete)
	}
	for _, e := range h.Events {
		see(e.Time)
	}
	for _, p := range h.Policies {
		see(p.Invoke)
		see(p.Time)
	}
	for _, a := range h.Assignments {
		see(a.Invoke)
		see(a.Time)
	}
	return start, end
}

// Interval is one injected fault: from its start event to its stop event.
type Interval struct {
	Name        string
	Start, Stop int64
	// Open: the fault was never stopped; Stop is the end of the history.
	Open   bool
	Detail map[string]string
}

// Contains reports whether t lies in [Start, Stop].
func (iv Interval) Contains(t int64) bool { return iv.Start <= t && t <= iv.Stop }

// NemesisIntervals pairs each nemesis stop with the latest unpaired start of
// the same Name (events taken in time order, ties in slice order), and
// returns the intervals sorted by start. A start never stopped gives an Open
// interval ending at the end of the history; a stop with no start is
// ignored (Validate reports it).
func (h History) NemesisIntervals() []Interval {
	events := nemesisEvents(h.Events)
	_, end := h.Span()
	open := make(map[string][]int) // name -> indexes into out of unpaired starts
	var out []Interval
	for _, e := range events {
		switch e.Phase {
		case PhaseStart:
			open[e.Name] = append(open[e.Name], len(out))
			out = append(out, Interval{Name: e.Name, Start: e.Time, Open: true, Detail: e.Detail})
		case PhaseStop:
			if st := open[e.Name]; len(st) > 0 {
				i := st[len(st)-1]
				open[e.Name] = st[:len(st)-1]
				out[i].Stop, out[i].Open = e.Time, false
			}
		}
	}
	for i := range out {
		if out[i].Open {
			out[i].Stop = max(end, out[i].Start)
		}
	}
	slices.SortStableFunc(out, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

func nemesisEvents(events []Event) []Event {
	var out []Event
	for _, e := range events {
		if e.Kind == KindNemesis {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int { return cmp.Compare(a.Time, b.Time) })
	return out
}

// Validate reports what is malformed in h: unknown kinds, outcomes or
// phases, negative costs, operations that complete before they are invoked,
// duplicates that are not ok answers, nemesis stops without a start,
// policy changes without a tier, and tier assignments without a key or
// invoke time, or that end before they are invoked. It returns nil for a well-formed history.
func (h History) Validate() []error {
	var errs []error
	for i, op := range h.Ops {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("op %d (key %q, request %q): %s", i, op.Key, op.RequestID, fmt.Sprintf(format, args...)))
		}
		if op.Key == "" {
			bad("empty key")
		}
		if op.Kind != KindAllow && op.Kind != KindRead {
			bad("unknown kind %q", op.Kind)
		}
		switch op.Outcome {
		case OutcomeOK, OutcomeFail, OutcomeInfo:
		default:
			bad("unknown outcome %q", op.Outcome)
		}
		if op.Cost < 0 {
			bad("negative cost %d", op.Cost)
		}
		if op.Complete < op.Invoke {
			bad("completes at %d before it is invoked at %d", op.Complete, op.Invoke)
		}
		if op.Duplicate && op.Outcome != OutcomeOK {
			bad("duplicate with outcome %q", op.Outcome)
		}
		if op.Duplicate && op.RequestID == "" {
			bad("duplicate without a request id")
		}
	}
	started := make(map[string]int)
	for _, e := range nemesisEvents(h.Events) {
		switch e.Phase {
		case PhaseStart:
			started[e.Name]++
		case PhaseStop:
			if started[e.Name] == 0 {
				errs = append(errs, fmt.Errorf("nemesis %q stops at %d without a start", e.Name, e.Time))
			} else {
				started[e.Name]--
			}
		default:
			errs = append(errs, fmt.Errorf("nemesis %q has unknown phase %q", e.Name, e.Phase))
		}
	}
	for i, p := range h.Policies {
		if p.Tier == "" {
			errs = append(errs, fmt.Errorf("policy change %d has no tier", i))
		}
		if p.Invoke != 0 && p.Time < p.Invoke {
			errs = append(errs, fmt.Errorf("policy change %d (tier %q) ends at %d before it is invoked at %d", i, p.Tier, p.Time, p.Invoke))
		}
	}
	for i, a := range h.Assignments {
		if a.Key == "" {
			errs = append(errs, fmt.Errorf("tier assignment %d has no key", i))
		}
		if a.Invoke == 0 {
			errs = append(errs, fmt.Errorf("tier assignment %d (key %q) has no invoke time", i, a.Key))
		}
		if a.Time < a.Invoke {
			errs = append(errs, fmt.Errorf("tier assignment %d (key %q) ends at %d before it is invoked at %d", i, a.Key, a.Time, a.Invoke))
		}
	}
	return errs
}

// Operation is one logical operation: the attempts that share a key and a
// request id (an attempt without a request id is an operation of its
// own), resolve and repeat probes included.
type Operation struct {
	Key, RequestID string
	// Attempts are indexes into History.Ops, in the order of h.Ops.
	Attempts []int
}

// Operations groups h.Ops into logical operations, in the order of their
// first attempts in h.Ops.
func (h History) Operations() []Operation {
	var out []Operation
	index := map[[2]string]int{}
	for i, op := range h.Ops {
		if op.RequestID == "" {
			out = append(out, Operation{Key: op.Key, Attempts: []int{i}})
			continue
		}
		k := [2]string{op.Key, op.RequestID}
		j, ok := index[k]
		if !ok {
			j = len(out)
			index[k] = j
			out = append(out, Operation{Key: op.Key, RequestID: op.RequestID})
		}
		out[j].Attempts = append(out[j].Attempts, i)
	}
	return out
}

// Settled says what an operation's attempts show: OutcomeOK if some
// attempt was answered with a decision, OutcomeInfo if none was but some
// attempt's outcome is unknown, OutcomeFail if every attempt was refused or
// promised that nothing was decided.
func (h History) Settled(o Operation) string {
	out := OutcomeFail
	for _, i := range o.Attempts {
		switch h.Ops[i].Outcome {
		case OutcomeOK:
			return OutcomeOK
		case OutcomeInfo:
			out = OutcomeInfo
		}
	}
	return out
}
