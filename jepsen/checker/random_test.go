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

// simConfig shapes a simulated run.
type simConfig struct {
	pol               bucket.Policy
	keys, procs, ops  int
	info, reads, dups float64 // fractions of ops
	slack             time.Duration
	change            *bucket.Policy // applied once, mid-run
}

// simulate runs the exact bucket model (bucket.Decide) the way the cluster
// does: every op is decided at a random real time τ inside its interval, in
// τ order (the log order), stamped with a leader clock off by up to ±slack
// and never below the group's high water. Info ops are applied or not at
// random, possibly after the harness gave up on them; duplicates repeat a
// decision later; an optional policy change is applied at a random point of
// its [invoke, ack]; now and then the leader forgets full buckets.
func simulate(rng *rand.Rand, cfg simConfig) history.History {
	type event struct {
		tau     int64
		op      int // index into ops, -1 for the policy change, -2 for a reclaim
		applied bool
	}
	var (
		ops    []history.Op
		events []event
	)
	ri := func(lo, hi time.Duration) int64 { return int64(lo) + rng.Int64N(int64(hi-lo)+1) }
	var end int64
	for p := range cfg.procs {
		t := at(0) + ri(0, 5*msec)
		for n := range cfg.ops {
			inv := t
			done := inv + ri(msec/10, 15*msec)
			op := history.Op{Process: p, Key: fmt.Sprintf("k%d", rng.IntN(cfg.keys)), Node: fmt.Sprintf("n%d", 1+rng.IntN(3)),
				Kind: history.KindAllow, Cost: 1, RequestID: fmt.Sprintf("p%d-%d", p, n), Invoke: inv, Complete: done, Outcome: history.OutcomeOK}
			if rng.IntN(10) == 0 {
				op.Cost = int64(rng.IntN(3))
			}
			applied := true
			switch f := rng.Float64(); {
			case f < cfg.reads:
				op.Kind, op.Cost, op.RequestID = history.KindRead, 0, ""
			case f < cfg.reads+cfg.info:
				op.Outcome = history.OutcomeInfo
				applied = rng.IntN(2) == 0
			}
			late := done
			if op.Outcome == history.OutcomeInfo {
				late += ri(0, 30*msec) // an entry may commit after the harness gave up
			}
			events = append(events, event{tau: inv + rng.Int64N(late-inv+1), op: len(ops), applied: applied})
			ops = append(ops, op)
			t = done + ri(0, 5*msec)
			end = max(end, t)
		}
	}
	h := history.History{ClockOffsets: map[string]int64{"n1": int64(cfg.slack), "n2": 0, "n3": 0}}
	if cfg.change != nil {
		inv := at(0) + (end-at(0))/3 + ri(0, 20*msec)
		ack := inv + ri(0, 3*msec)
		h.Policies = append(h.Policies, history.Policy{Time: ack, Invoke: inv, Tier: bucket.DefaultTierName,
			Capacity: cfg.change.Capacity, RatePerSec: bucket.FormatRate(cfg.change.Rate), Acked: true})
		events = append(events, event{tau: inv + rng.Int64N(ack-inv+1), op: -1})
	}
	for tau := at(0) + ri(0, 20*msec); tau < end; tau += ri(msec, 40*msec) {
		events = append(events, event{tau: tau, op: -2})
	}
	slices.SortStableFunc(events, func(a, b event) int { return cmp.Compare(a.tau, b.tau) })

	pol := cfg.pol
	states := map[string]bucket.State{}
	var hw int64
	stamp := func(tau int64) int64 {
		return max(tau+ri(-cfg.slack, cfg.slack), hw)
	}
	answers := map[int]history.Op{} // decisions of info ops that were applied
	decided := map[int]int64{}      // when each applied op was decided
	for _, ev := range events {
		switch ev.op {
		case -1:
			pol = *cfg.change
			continue
		case -2:
			hw = stamp(ev.tau)
			for k, s := range states {
				if bucket.IsFull(pol, s, hw) {
					delete(states, k)
				}
			}
			continue
		}
		op := &ops[ev.op]
		s, ok := states[op.Key]
		if op.Kind == history.KindRead {
			now := stamp(ev.tau)
			if !ok {
				s = bucket.New(pol, now)
			}
			d := bucket.Peek(pol, s, now, 1)
			op.Remaining, op.Limit, op.Tier, op.Stamp = d.RemainingTokens(), d.Limit, bucket.DefaultTierName, now
			continue
		}
		if !ev.applied {
			continue
		}
		hw = stamp(ev.tau)
		if !ok {
			s = bucket.New(pol, hw)
		}
		s, d := bucket.Decide(pol, s, hw, op.Cost)
		states[op.Key] = s
		decided[ev.op] = ev.tau
		answer := *op
		answer.Outcome, answer.Allowed, answer.Remaining, answer.Limit, answer.Tier, answer.Stamp =
			history.OutcomeOK, d.Allowed, d.RemainingTokens(), d.Limit, bucket.DefaultTierName, hw
		if op.Outcome == history.OutcomeInfo {
			answers[ev.op] = answer
		} else {
			*op = answer
		}
	}
	// Duplicate answers: retries of ok ops, and retries that resolve info
	// ops that were applied.
	n := len(ops)
	for i := range n {
		op := ops[i]
		if op.Kind != history.KindAllow || rng.Float64() >= cfg.dups {
			continue
		}
		dup, ok := op, op.Outcome == history.OutcomeOK
		if a, applied := answers[i]; applied {
			dup, ok = a, true
		}
		if !ok {
			continue
		}
		// A retry answered as a duplicate comes after the decision.
		dup.Invoke = max(op.Complete, decided[i]) + ri(0, 10*msec)
		dup.Complete = dup.Invoke + ri(msec/10, 5*msec)
		dup.Duplicate = true
		ops = append(ops, dup)
	}
	h.Ops = ops
	return h
}

func randomConfig(rng *rand.Rand, info bool) simConfig {
	pols := []bucket.Policy{
		{Capacity: 1, Rate: 0},
		{Capacity: 3, Rate: 2 * bucket.Scale},
		{Capacity: 5, Rate: bucket.Scale / 2},
		{Capacity: 2, Rate: 50 * bucket.Scale},
		{Capacity: 10, Rate: 123_456_789},
	}
	cfg := simConfig{
		pol:   pols[rng.IntN(len(pols))],
		keys:  1 + rng.IntN(3),
		procs: 2 + rng.IntN(4),
		ops:   20 + rng.IntN(30),
		reads: 0.1,
		dups:  0.1,
		slack: time.Duration(rng.IntN(3)) * 2 * msec,
	}
	if info {
		cfg.info = 0.1
		if rng.IntN(2) == 0 {
			c := pols[rng.IntN(len(pols))]
			cfg.change = &c
		}
	}
	return cfg
}

// TestRandomHistoriesPass: histories of the exact model with concurrency,
// clock offsets, info ops, reads, duplicates and a policy change pass every
// checker.
func TestRandomHistoriesPass(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 1))
		cfg := randomConfig(rng, true)
		h := simulate(rng, cfg)
		p := Params{Default: cfg.pol, Timeout: 20 * time.Second}
		for _, res := range CheckAll(h, p) {
			if res.Name == "over-admission" && !res.Valid {
				// A tenth of the operations stay unknown, and counted as
				// admitted they may exceed the bound; the definite ones
				// alone never may.
				assert.Equal(t, res.Summary["violating_keys"], res.Summary["violating_keys_only_with_unknown"],
					"seed %d (%+v): %s", seed, cfg, strings.Join(res.Failures, "\n"))
				continue
			}
			assert.True(t, res.Valid, "seed %d (%+v): %s: %s", seed, cfg, res.Name, strings.Join(res.Failures, "\n"))
		}
	}
}

// TestRandomMutationsAreRejected: one changed answer in a history of the
// exact model makes it non-linearizable. The mutated decision has a stamp no
// other decision of its key shares and the history has no info ops or
// policy changes, so its place in any linearization and its exact balance
// are forced.
func TestRandomMutationsAreRejected(t *testing.T) {
	mutations := []struct {
		name string
		f    func(*history.Op)
	}{
		{"one more token left", func(op *history.Op) { op.Remaining++ }},
		{"one fewer token left", func(op *history.Op) { op.Remaining-- }},
		{"allowed flipped", func(op *history.Op) { op.Allowed = !op.Allowed }},
	}
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 2))
		cfg := randomConfig(rng, false)
		h := simulate(rng, cfg)
		p := Params{Default: cfg.pol, Timeout: 20 * time.Second}
		require.True(t, Linearizable(h, p).Valid, "seed %d: unmutated history", seed)

		stamps := map[[2]any]int{}
		for _, op := range h.Ops {
			if op.Kind == history.KindAllow && op.Outcome == history.OutcomeOK && !op.Duplicate {
				stamps[[2]any{op.Key, op.Stamp}]++
			}
		}
		var targets []int
		for i, op := range h.Ops {
			if op.Kind == history.KindAllow && op.Outcome == history.OutcomeOK && !op.Duplicate && stamps[[2]any{op.Key, op.Stamp}] == 1 {
				targets = append(targets, i)
			}
		}
		require.NotEmpty(t, targets, "seed %d", seed)
		m := mutations[int(seed)%len(mutations)]
		i := targets[rng.IntN(len(targets))]
		if m.name == "one fewer token left" && h.Ops[i].Remaining == 0 {
			m = mutations[0]
		}
		bad := h
		bad.Ops = slices.Clone(h.Ops)
		m.f(&bad.Ops[i])
		res := Linearizable(bad, p)
		assert.False(t, res.Valid, "seed %d: %s on op %d (%+v) was accepted", seed, m.name, i, h.Ops[i])
	}
}
