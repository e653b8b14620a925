package checker

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// win is a sliding window of 3 per second.
var win = bucket.Policy{Algorithm: bucket.SlidingWindow, Capacity: 3, Window: bucket.Second}

// winParams puts key "w" in tier "win" (win), with exact clocks.
func winParams() *Params {
	p := params()
	p.Tiers = map[string]bucket.Policy{"win": win}
	p.KeyTiers = map[string]string{"w": "win"}
	return &p
}

// wAllowed and wDenied are ok cost-1 window decisions of key "w".
func wAllowed(inv, done, stamp time.Duration, remaining int64) history.Op {
	return history.Op{Key: "w", Node: "n1", Kind: history.KindAllow, Cost: 1, Invoke: at(inv), Complete: at(done),
		Outcome: history.OutcomeOK, Allowed: true, Remaining: remaining, Limit: 3, WindowSeconds: 1, Tier: "win", Stamp: at(stamp)}
}

func wDenied(inv, done, stamp time.Duration, remaining int64) history.Op {
	op := wAllowed(inv, done, stamp, remaining)
	op.Allowed = false
	return op
}

func wUnknown(inv, done time.Duration) history.Op {
	return history.Op{Key: "w", Node: "n1", Kind: history.KindAllow, Cost: 1, Invoke: at(inv), Complete: at(done), Outcome: history.OutcomeInfo}
}

// threeAt are three admissions of "w" at 0, 1 and 2 ms.
func threeAt() []history.Op {
	return []history.Op{wAllowed(0, msec, 0, 2), wAllowed(msec, 2*msec, msec, 1), wAllowed(2*msec, 3*msec, 2*msec, 0)}
}

func withPolicies(h history.History, ps ...history.Policy) history.History {
	h.Policies = append(h.Policies, ps...)
	return h
}

func TestWindows(t *testing.T) {
	wp := winParams()
	runCases(t, Windows, []checkCase{
		{name: "three, a denial, and the first expiring exactly W later", p: wp, valid: true, h: hist(append(threeAt(),
			wDenied(500*msec, 501*msec, 500*msec, 0),
			wAllowed(time.Second, time.Second+msec, time.Second, 0),
			wDenied(time.Second+msec/2, time.Second+2*msec, time.Second+msec/2, 0),
			wAllowed(time.Second+2*msec, time.Second+3*msec, time.Second+2*msec, 1),
		)...)},
		{name: "a fourth admission one nanosecond inside the window", p: wp, failure: "above the window's limit 3", h: hist(append(threeAt(),
			wAllowed(time.Second-msec, time.Second, time.Second-1, 0),
		)...)},
		{name: "one batch of three at one stamp", p: wp, valid: true, h: hist(
			wAllowed(0, msec, 0, 0), wAllowed(0, msec, 0, 2), wAllowed(0, msec, 0, 1),
		)},
		{name: "one batch of four at one stamp", p: wp, failure: "above the window's limit", h: hist(
			wAllowed(0, msec, 0, 0), wAllowed(0, msec, 0, 2), wAllowed(0, msec, 0, 1), wAllowed(0, msec, 0, 0),
		)},
		{name: "a duplicate answer is the same admission", p: wp, valid: true, h: hist(
			with(wAllowed(0, msec, 0, 2), reqID("a")), with(wAllowed(msec, 2*msec, msec, 1), reqID("b")),
			with(wAllowed(5*msec, 6*msec, msec, 1), reqID("b"), duplicate()),
			with(wAllowed(2*msec, 3*msec, 2*msec, 0), reqID("c")),
		)},
		{name: "an unknown op does not count against the upper bound", p: wp, valid: true, h: hist(append(threeAt(),
			wUnknown(3*msec, 900*msec), wDenied(400*msec, 401*msec, 400*msec, 0))...)},
		{name: "remaining above what is left", p: wp, failure: "remaining 2, but at least 2", h: hist(
			wAllowed(0, msec, 0, 2), wAllowed(msec, 2*msec, msec, 2),
		)},
		{name: "remaining below what is left", p: wp, failure: "remaining 0, but at most 2", h: hist(
			wAllowed(0, msec, 0, 2), wAllowed(msec, 2*msec, msec, 0),
		)},
		{name: "denied with room", p: wp, failure: "denied, but at most 2", h: hist(
			wAllowed(0, msec, 0, 2), wAllowed(msec, 2*msec, msec, 1), wDenied(2*msec, 3*msec, 2*msec, 1),
		)},
		{name: "denied with room that an unknown op may have taken", p: wp, valid: true, h: hist(
			wAllowed(0, msec, 0, 2), wAllowed(msec, 2*msec, msec, 1), wUnknown(msec, 10*msec), wDenied(20*msec, 21*msec, 20*msec, 0),
		)},
		{name: "an answer from a window that is not the tier's", p: wp, failure: "window of 2s", h: hist(
			with(wAllowed(0, msec, 0, 2), func(op *history.Op) { op.WindowSeconds = 2 }),
		)},
		{name: "a fill on raise may empty the window", p: wp, valid: true, h: withPolicies(hist(append(threeAt(),
			with(wAllowed(200*msec, 201*msec, 200*msec, 4), limit(5)), with(wAllowed(201*msec, 202*msec, 201*msec, 3), limit(5)))...),
			history.Policy{Tier: "win", Algorithm: "sliding_window", Limit: 5, WindowSeconds: 1, OnRaise: "fill", Invoke: at(100 * msec), Time: at(110 * msec), Acked: true})},
		{name: "a raise that keeps the window", p: wp, failure: "remaining 4", h: withPolicies(hist(append(threeAt(),
			with(wAllowed(200*msec, 201*msec, 200*msec, 4), limit(5)), with(wAllowed(201*msec, 202*msec, 201*msec, 3), limit(5)))...),
			history.Policy{Tier: "win", Algorithm: "sliding_window", Limit: 5, WindowSeconds: 1, Invoke: at(100 * msec), Time: at(110 * msec), Acked: true})},
	})
}

// simulateWindows decides ops on window keys the way a group does: each
// at a random real time inside its interval, in that order (the log
// order), stamped by a leader clock off by up to ±slack and never below
// the high water, with stamps now and then shared (a batch); info ops are
// applied or not, possibly after the harness gave up; duplicates repeat a
// decision; the tier's limit changes now and then (acked, applied inside
// its interval). It returns the history and the window tier's first policy.
func simulateWindows(rng *rand.Rand, info, dups float64, changes int) (history.History, bucket.Policy) {
	pol := bucket.Policy{Algorithm: bucket.SlidingWindow, Capacity: int64(2 + rng.IntN(4)), Window: int64(1+rng.IntN(2)) * bucket.Second}
	slack := time.Duration(rng.IntN(3)) * 20 * msec
	type event struct {
		tau     int64
		i       int // op index, or -1-k for policy change k
		applied bool
	}
	var ops []history.Op
	var events []event
	ri := func(lo, hi time.Duration) int64 { return int64(lo) + rng.Int64N(int64(hi-lo)+1) }
	var end int64
	for p := range 2 + rng.IntN(4) {
		t := at(0) + ri(0, 50*msec)
		for n := range 20 + rng.IntN(40) {
			inv := t
			done := inv + ri(msec, 80*msec)
			op := history.Op{Process: p, Key: fmt.Sprintf("w%d", rng.IntN(2)), Node: "n1", Kind: history.KindAllow, Cost: 1,
				RequestID: fmt.Sprintf("p%d-%d", p, n), Invoke: inv, Complete: done, Outcome: history.OutcomeOK}
			if rng.IntN(8) == 0 {
				op.Cost = int64(rng.IntN(3))
			}
			applied, late := true, done
			if rng.Float64() < info {
				op.Outcome, applied = history.OutcomeInfo, rng.IntN(2) == 0
				late += ri(0, 100*msec)
			}
			events = append(events, event{tau: inv + rng.Int64N(late-inv+1), i: len(ops), applied: applied})
			ops = append(ops, op)
			t = done + ri(0, 150*msec)
			end = max(end, t)
		}
	}
	h := history.History{ClockOffsets: map[string]int64{"n1": int64(slack)}}
	for k := range changes {
		inv := at(0) + rng.Int64N(end-at(0))
		ack := inv + ri(0, 50*msec)
		h.Policies = append(h.Policies, history.Policy{Tier: "win", Algorithm: "sliding_window", Limit: int64(1 + rng.IntN(5)),
			WindowSeconds: pol.Window / bucket.Second, Invoke: inv, Time: ack, Acked: true})
		events = append(events, event{tau: inv + rng.Int64N(ack-inv+1), i: -1 - k, applied: true})
	}
	slices.SortStableFunc(events, func(a, b event) int { return cmp.Compare(a.tau, b.tau) })
	cur := pol
	windows := map[string]bucket.Window{}
	var hw int64
	answers := map[int]history.Op{}
	decided := map[int]int64{}
	for _, ev := range events {
		if ev.i < 0 {
			cur.Capacity = h.Policies[-1-ev.i].Limit
			continue
		}
		if !ev.applied {
			continue
		}
		if rng.IntN(4) != 0 || hw < ev.tau-int64(slack) { // else: in the same batch as the last decision
			hw = max(hw, ev.tau+ri(-slack, slack))
		}
		op := &ops[ev.i]
		w, d := bucket.DecideWindow(cur, windows[op.Key], hw, op.Cost)
		windows[op.Key] = w
		decided[ev.i] = ev.tau
		a := *op
		a.Outcome, a.Allowed, a.Remaining, a.Limit, a.Tier, a.Stamp, a.WindowSeconds = history.OutcomeOK, d.Allowed, d.RemainingTokens(), d.Limit, "win", hw, cur.Window/bucket.Second
		if op.Outcome == history.OutcomeInfo {
			answers[ev.i] = a
		} else {
			*op = a
		}
	}
	for i := range len(ops) {
		dup, ok := ops[i], ops[i].Outcome == history.OutcomeOK
		if a, applied := answers[i]; applied {
			dup, ok = a, true
		}
		if !ok || rng.Float64() >= dups {
			continue
		}
		dup.Invoke = max(ops[i].Complete, decided[i]) + ri(0, 30*msec)
		dup.Complete, dup.Duplicate = dup.Invoke+ri(msec, 20*msec), true
		ops = append(ops, dup)
	}
	h.Ops = ops
	return h, pol
}

// windowSimParams puts keys w0 and w1 in tier "win" under pol.
func windowSimParams(pol bucket.Policy) Params {
	return Params{Default: free, Tiers: map[string]bucket.Policy{"win": pol}, KeyTiers: map[string]string{"w0": "win", "w1": "win"}, Timeout: 10 * time.Second}
}

// TestRandomWindowHistoriesPass: windows decided exactly as the server
// does, with batches, clock offsets, info ops, duplicates and limit
// changes, pass the window checker and every other checker that applies.
func TestRandomWindowHistoriesPass(t *testing.T) {
	admitted, denied, over := 0, 0, 0
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 7))
		h, pol := simulateWindows(rng, 0.1, 0.1, rng.IntN(3))
		for _, res := range CheckAll(h, windowSimParams(pol)) {
			require.True(t, res.Valid, "seed %d: %s: %s", seed, res.Name, strings.Join(res.Failures, "\n"))
			if res.Name == "window" {
				admitted += res.Summary["admissions"].(int)
				denied += res.Summary["denials"].(int)
				if r := res.Summary["worst_window_ratio"].(float64); r == 1 {
					over++
				}
			}
		}
	}
	assert.Positive(t, admitted)
	assert.Positive(t, denied)
	assert.Positive(t, over, "some windows were full")
}

// TestRandomWindowMutationsAreRejected: one changed answer of a decision
// with a stamp of its own, in a history without unknown outcomes, is
// always caught: its window's sums are then exact.
func TestRandomWindowMutationsAreRejected(t *testing.T) {
	mutations := []func(*history.Op) bool{
		func(op *history.Op) bool { // a denial admitted
			if op.Allowed || op.Cost == 0 || op.Cost > op.Limit {
				return false
			}
			op.Allowed = true
			op.Remaining = max(0, op.Remaining-op.Cost)
			return true
		},
		func(op *history.Op) bool { op.Remaining++; return true },
		func(op *history.Op) bool {
			if op.Remaining == 0 {
				return false
			}
			op.Remaining--
			return true
		},
		func(op *history.Op) bool { // an admission denied
			if !op.Allowed || op.Cost == 0 {
				return false
			}
			op.Allowed = false
			return true
		},
	}
	tried := 0
	for seed := range uint64(120) {
		rng := rand.New(rand.NewPCG(seed, 8))
		h, pol := simulateWindows(rng, 0, 0, 0)
		p := windowSimParams(pol)
		require.True(t, Windows(h, p).Valid, "seed %d: unmutated", seed)
		stamps := map[[2]any]int{}
		for _, op := range h.Ops {
			stamps[[2]any{op.Key, op.Stamp}]++
		}
		var targets []int
		for i, op := range h.Ops {
			if stamps[[2]any{op.Key, op.Stamp}] == 1 {
				targets = append(targets, i)
			}
		}
		if len(targets) == 0 {
			continue
		}
		i := targets[rng.IntN(len(targets))]
		bad := h
		bad.Ops = slices.Clone(h.Ops)
		if !mutations[int(seed)%len(mutations)](&bad.Ops[i]) {
			continue
		}
		tried++
		assert.False(t, Windows(bad, p).Valid, "seed %d: mutation %d of %+v accepted", seed, int(seed)%len(mutations), h.Ops[i])
	}
	assert.Greater(t, tried, 60)
}
