// Package checker judges a recorded fault-suite history (jepsen/history)
// against quorate's contract: linearizable decisions (checked with
// porcupine against the exact token-bucket model), idempotent retries,
// plausible decision stamps, the over-admission bound C + r·W in group time
// (plus C for each fill on raise), sliding windows (at most N in any W, by
// the stamps), policy changes and tier assignments that stay in force once
// acknowledged, and availability under faults.
//
// Every checker is a func(history.History, Params) Result and is meant to be
// sound in the direction that matters for a verdict: a history that a
// correct cluster could have produced must pass (no false alarms), given the
// assumptions each checker documents. Above all: the harness clock is the
// real time, each node's clock is real time plus an offset of at most its
// ClockOffsets entry, a decision is made at a real time inside its
// operation's [Invoke, Complete], and the keys are new at the start of the
// run (their buckets start full).
package checker

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// Defaults used when a Params field is zero.
const (
	DefaultMaxRecovery = 10 * time.Second
	DefaultTimeout     = 60 * time.Second
	DefaultMaxFailures = 20
)

// Params is what the checkers need besides the history.
type Params struct {
	// Default is the default policy at the start of the run (tier
	// "default"); it must be valid.
	Default bucket.Policy
	// Tiers are the tier policies at the start of the run. A tier missing
	// here uses Default until a change in History.Policies sets it.
	Tiers map[string]bucket.Policy
	// KeyTiers maps a key to its initial tier. A key missing here takes the
	// Tier of its first ok answer completed before any assignment of the key
	// was invoked, or "default" if it has none. A key's tier changes only by
	// the assignments in History.Assignments: an acked one is in force for
	// every decision invoked after its ack (until a later one may have
	// replaced it), one that is not acked may take effect at any time after
	// its invoke, or never.
	KeyTiers map[string]string
	// ClockSlack bounds |node clock - harness clock| for the stamp checks.
	// Zero: the largest History.ClockOffsets entry. Negative: zero.
	ClockSlack time.Duration
	// Skew is ε of the real-time form of the over-admission bound,
	// C + r·(T + ε), which the runner's plots draw: the largest difference
	// between the clocks of two leaders. Zero: twice the largest
	// History.ClockOffsets entry. OverAdmission itself counts in group time
	// and needs no ε.
	Skew time.Duration
	// AccountKeys are the keys Accounting checks: each must stay under one
	// policy with rate 0 for the whole run, and the history must end with
	// a read of its balance.
	AccountKeys []string
	// NodeIDs maps the address an op was sent to (Op.Node) to the node's
	// id as the nemesis events name it ("n1", ...). With it, Availability
	// also counts the attempts sent to the node(s) each fault hit. Nil:
	// not counted.
	NodeIDs map[string]string
	// MaxRecovery is the longest a key may take, after the last fault is
	// healed, to get an ok answer. Zero: DefaultMaxRecovery. Negative: no
	// limit.
	MaxRecovery time.Duration
	// Timeout bounds the whole linearizability search. Zero: DefaultTimeout.
	Timeout time.Duration
	// MaxFailures is how many failure messages a Result keeps. Zero:
	// DefaultMaxFailures.
	MaxFailures int
}

// Result is one checker's verdict.
type Result struct {
	Name string `json:"name"`
	// Valid is false if the checker found a violation (or, for the
	// linearizability search, could not decide in time).
	Valid bool `json:"valid"`
	// Summary holds numbers: counts, fractions, durations in milliseconds.
	Summary map[string]any `json:"summary"`
	// Failures are human-readable descriptions of the first violations.
	Failures []string `json:"failures,omitempty"`
	// Visualization is set by Linearizable when some key failed or timed
	// out: porcupine's HTML view of those keys.
	Visualization *Visualization `json:"-"`
}

// CheckAll runs every checker: history well-formedness, linearizability,
// duplicates, stamps, over-admission, windows, accounting, policy and
// availability, in that order.
func CheckAll(h history.History, p Params) []Result {
	return []Result{
		WellFormed(h, p),
		Linearizable(h, p),
		Duplicates(h, p),
		Stamps(h, p),
		OverAdmission(h, p),
		Windows(h, p),
		Accounting(h, p),
		PolicyChanges(h, p),
		Availability(h, p),
	}
}

// Valid reports whether every result is valid.
func Valid(results []Result) bool {
	for _, r := range results {
		if !r.Valid {
			return false
		}
	}
	return true
}

// WellFormed fails on a malformed history (history.Validate), on an ok
// answer without a stamp, on an acked policy change whose numbers do not
// parse, on invalid Params, and on a history with no ok decision at all: a
// run that recorded nothing must not pass.
func WellFormed(h history.History, p Params) Result {
	r := newReport("history", p)
	for _, err := range h.Validate() {
		r.fail("%v", err)
	}
	if err := p.Default.Validate(); err != nil {
		r.fail("params: default policy: %v", err)
	}
	for _, c := range h.Policies {
		if _, err := parsePolicy(c); err != nil && c.Acked {
			r.fail("acked policy change for tier %q: %v", c.Tier, err)
		}
	}
	ok := 0
	for i, op := range h.Ops {
		if op.Outcome != history.OutcomeOK {
			continue
		}
		if op.Kind == history.KindAllow {
			ok++
		}
		if op.Stamp == 0 {
			r.fail("op %d (key %q, request %q): ok answer without a stamp", i, op.Key, op.RequestID)
		}
	}
	if ok == 0 {
		r.fail("no ok allow operation in the history: nothing to check")
	}
	r.set("ops", len(h.Ops))
	r.set("ok_allows", ok)
	r.set("events", len(h.Events))
	r.set("policy_changes", len(h.Policies))
	r.set("tier_assignments", len(h.Assignments))
	return r.result()
}

// report collects a checker's failures and summary.
type report struct {
	name     string
	max      int
	n        int
	failures []string
	summary  map[string]any
}

func newReport(name string, p Params) *report {
	m := p.MaxFailures
	if m <= 0 {
		m = DefaultMaxFailures
	}
	return &report{name: name, max: m, summary: map[string]any{}}
}

func (r *report) fail(format string, args ...any) {
	r.n++
	if len(r.failures) < r.max {
		r.failures = append(r.failures, fmt.Sprintf(format, args...))
	}
}

func (r *report) set(key string, v any) { r.summary[key] = v }

func (r *report) result() Result {
	r.summary["failures"] = r.n
	return Result{Name: r.name, Valid: r.n == 0, Summary: r.summary, Failures: r.failures}
}

// clock renders harness times relative to the start of the history.
type clock struct{ t0 int64 }

func newClock(h history.History) clock {
	s, _ := h.Span()
	return clock{t0: s}
}

func (c clock) at(t int64) string {
	switch t {
	case math.MaxInt64:
		return "+∞"
	case math.MinInt64:
		return "-∞"
	}
	return fmt.Sprintf("%+.6fs", float64(t-c.t0)/1e9)
}

func dur(ns int64) string { return time.Duration(ns).String() }

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// clockSlack resolves Params.ClockSlack against h.
func (p Params) clockSlack(h history.History) int64 {
	switch {
	case p.ClockSlack < 0:
		return 0
	case p.ClockSlack > 0:
		return int64(p.ClockSlack)
	}
	return maxOffset(h)
}

func maxOffset(h history.History) int64 {
	var m int64
	for _, off := range h.ClockOffsets {
		if off < 0 {
			off = -off
		}
		m = max(m, off)
	}
	return m
}

// describe renders an op for failure messages.
func describe(c clock, op history.Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s cost %d", op.Kind, op.Cost)
	if op.RequestID != "" {
		fmt.Fprintf(&b, " req %s", op.RequestID)
	}
	fmt.Fprintf(&b, " [%s, %s]", c.at(op.Invoke), c.at(op.Complete))
	if op.Node != "" {
		fmt.Fprintf(&b, " via %s", op.Node)
	}
	switch op.Outcome {
	case history.OutcomeOK:
		verdict := "denied"
		if op.Allowed {
			verdict = "allowed"
		}
		if op.Kind == history.KindRead {
			verdict = "read"
		}
		fmt.Fprintf(&b, " -> %s remaining %d limit %d stamp %s", verdict, op.Remaining, op.Limit, c.at(op.Stamp))
		if op.Duplicate {
			b.WriteString(" (duplicate)")
		}
	default:
		fmt.Fprintf(&b, " -> %s", op.Outcome)
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
