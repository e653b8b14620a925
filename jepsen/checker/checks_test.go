package checker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

func TestDuplicates(t *testing.T) {
	orig := with(allowed(0, msec, msec/2, 4), reqID("r1"))
	runCases(t, Duplicates, []checkCase{
		{name: "duplicate repeats the original", valid: true, h: hist(
			orig, with(orig, duplicate(), node("n2")),
		)},
		{name: "duplicate resolves an info attempt", valid: true, h: hist(
			with(unknown(0, 100*msec), reqID("r1")),
			with(allowed(200*msec, 201*msec, 50*msec, 4), reqID("r1"), duplicate()),
		)},
		{name: "duplicate disagrees with the original", failure: "differs from the original", h: hist(
			orig, with(orig, duplicate(), remaining(3)),
		)},
		{name: "duplicate with another stamp", failure: "differs", h: hist(
			orig, with(orig, duplicate(), stampAt(2*msec)),
		)},
		{name: "two duplicates of an info attempt disagree", failure: "differs", h: hist(
			with(unknown(0, 100*msec), reqID("r1")),
			with(allowed(200*msec, 201*msec, 50*msec, 4), reqID("r1"), duplicate()),
			with(allowed(300*msec, 301*msec, 50*msec, 3), reqID("r1"), duplicate()),
		)},
		{name: "request applied twice", failure: "decided twice", h: hist(
			orig, with(allowed(10*msec, 11*msec, 10*msec, 3), reqID("r1")),
		)},
		{name: "duplicate of a request that was never applied", failure: "nothing decided", h: hist(
			with(orig, outcome(history.OutcomeFail)),
			with(orig, duplicate()),
		)},
		{name: "a 503 that promised nothing, then a duplicate", failure: "nothing decided", h: hist(
			with(unknown(0, 100*msec), reqID("r1"), outcome(history.OutcomeFail), func(op *history.Op) { op.Status, op.Error = 503, "unavailable" }),
			with(allowed(150*msec, 160*msec, 50*msec, 4), reqID("r1"), duplicate()),
		)},
		{name: "a repeat of a decided request", valid: true, h: hist(
			orig, with(unknown(2*msec, 3*msec), reqID("r1"), outcome(history.OutcomeFail)), with(orig, duplicate(), func(op *history.Op) { op.Probe = "repeat" }),
		)},
		{name: "same request id on another key is another request", valid: true, h: hist(
			orig, with(allowed(10*msec, 11*msec, 10*msec, 4), reqID("r1"), key("b")),
		)},
	})
}

func TestStamps(t *testing.T) {
	offsets := func(h history.History, off time.Duration) history.History {
		h.ClockOffsets = map[string]int64{"n1": 0, "n2": int64(off)}
		return h
	}
	derived := params()
	derived.ClockSlack = 0 // from the history's clock offsets
	slack5 := params()
	slack5.ClockSlack = 5 * msec
	runCases(t, Stamps, []checkCase{
		{name: "stamps inside the intervals", valid: true, h: hist(burst(0, 5, "n1")...)},
		{name: "stamp before the invoke", failure: "before the op was invoked", h: hist(
			allowed(10*msec, 11*msec, 9*msec, 4),
		)},
		{name: "stamp after the completion", failure: "after the op completed", h: hist(
			allowed(10*msec, 11*msec, 12*msec, 4),
		)},
		{name: "stamp outside, but within the injected offset", p: &derived, valid: true, h: offsets(hist(
			allowed(10*msec, 11*msec, 12*msec, 4),
		), 250*msec)},
		{name: "stamp outside the injected offset", p: &derived, failure: "beyond the clock slack 250ms", h: offsets(hist(
			allowed(10*msec, 11*msec, 300*msec, 4),
		), 250*msec)},
		{name: "stamp going back", failure: "stamp went back by 5ms", h: hist(
			allowed(0, 10*msec, 8*msec, 4),
			allowed(11*msec, 20*msec, 11*msec, 3),
			allowed(21*msec, 30*msec, 21*msec-5*msec+msec, 2),
			allowed(31*msec, 40*msec, 35*msec, 1),
			allowed(41*msec, 50*msec, 30*msec, 0),
		)},
		{name: "concurrent ops may have stamps in either order", valid: true, h: hist(
			allowed(0, 10*msec, 8*msec, 3),
			allowed(5*msec, 12*msec, 6*msec, 4),
		)},
		{name: "a decision after a read may have a lower stamp", p: &slack5, valid: true, h: hist(
			read(0, 10*msec, 14*msec, 5), // a leader ahead by 4ms answered the read
			allowed(11*msec, 20*msec, 12*msec, 4),
		)},
		{name: "a read after a decision may not", failure: "went back", h: hist(
			allowed(0, 10*msec, 9*msec, 4),
			read(11*msec, 20*msec, 8*msec, 4),
		)},
		{name: "duplicate carries the original stamp", valid: true, h: hist(
			with(allowed(0, msec, msec/2, 4), reqID("r1")),
			with(allowed(10*msec, 11*msec, msec/2, 4), reqID("r1"), duplicate()),
		)},
	})
}

func TestOverAdmission(t *testing.T) {
	m := func(n float64) time.Duration { return time.Duration(n * float64(msec)) }
	skewed := params()
	skewed.Skew = 0 // twice the largest offset
	// steady admits one token every period for n periods after a full burst.
	steady := func(period time.Duration, n int) []history.Op {
		ops := burst(0, 5, "n1")
		for i := 1; i <= n; i++ {
			t := 4*msec + time.Duration(i)*period
			ops = append(ops, allowed(t, t+m(0.5), t+m(0.25), 0))
		}
		return ops
	}
	withInfo := func(h history.History, ops ...history.Op) history.History {
		h.Ops = append(h.Ops, ops...)
		return h
	}
	runCases(t, OverAdmission, []checkCase{
		{name: "a full bucket, then the refill rate", valid: true, h: hist(steady(time.Second, 5)...)},
		{name: "exactly at the bound", valid: true, h: hist(
			// 6 tokens admitted within [0, 1s]: C + r·1s = 6.
			allowed(0, m(0.5), 0, 4), allowed(m(1), m(1.5), m(1), 3), allowed(m(2), m(2.5), m(2), 2),
			allowed(m(3), m(3.5), m(3), 1), allowed(m(4), m(4.5), m(4), 0),
			allowed(m(999.5), m(1000.5), m(1000), 0),
		)},
		{name: "just over the bound", failure: "7 tokens admitted", h: hist(
			allowed(0, m(0.5), 0, 4), allowed(m(1), m(1.5), m(1), 3), allowed(m(2), m(2.5), m(2), 2),
			allowed(m(3), m(3.5), m(3), 1), allowed(m(4), m(4.5), m(4), 0),
			allowed(m(998), m(998.5), m(998), 0), allowed(m(999), m(1000), m(999), 0),
		)},
		{name: "over-admission after a failover", failure: "excess 4.9", h: hist(
			append(burst(0, 5, "n1"), burst(20*msec, 5, "n2")...)...)},
		{name: "failover excess is found even with a clock skew", p: &skewed, failure: "excess 4.976", h: func() history.History {
			h := hist(append(burst(0, 5, "n1"), burst(20*msec, 5, "n2")...)...)
			h.ClockOffsets = map[string]int64{"n2": int64(250 * msec)}
			return h
		}()},
		{name: "a leader clock ahead credits more refill, in group time", p: &skewed, valid: true, h: func() history.History {
			// n1 250 ms behind stamps the burst, n2 250 ms ahead the sixth
			// admission 600 ms later in real time: 1.1 s of group time.
			var ops []history.Op
			for _, op := range burst(0, 5, "n1") {
				ops = append(ops, with(op, func(op *history.Op) { op.Stamp -= int64(250 * msec) }))
			}
			h := hist(append(ops, with(allowed(m(600), m(600.5), m(850), 0), node("n2")))...)
			h.ClockOffsets = map[string]int64{"n1": -int64(250 * msec), "n2": int64(250 * msec)}
			return h
		}()},
		{name: "same without the skew", failure: "6 tokens admitted", h: hist(
			append(burst(0, 5, "n1"), allowed(m(600), m(600.5), m(600), 0))...)},
		{name: "slow over-admission over the whole run", failure: "tokens admitted", h: hist(steady(500*msec, 20)...)},
		{name: "raised capacity may be used at once", valid: true, h: withChanges(hist(
			append(burst(0, 5, "n1"), allowed(m(30), m(30.5), m(30), 4), allowed(m(31), m(31.5), m(31), 3))...),
			policyChange(bucket.DefaultTierName, m(10), m(20), 7, "1"))},
		{name: "only the raised capacity", failure: "C 7", h: withChanges(hist(
			append(burst(0, 5, "n1"), burst(m(30), 5, "n2")...)...),
			policyChange(bucket.DefaultTierName, m(10), m(20), 7, "1"))},
	})

	res := OverAdmission(hist(append(burst(0, 5, "n1"), burst(20*msec, 5, "n2")...)...), params())
	// The stamps span [0.25ms, 24.25ms]: bound 5 + 0.024.
	assert.InDelta(t, 4.976, res.Summary["worst_excess_tokens"], 1e-9)
	assert.InDelta(t, 10/5.024, res.Summary["worst_ratio"], 1e-9)
	assert.Equal(t, 1, res.Summary["violating_keys"])

	info := OverAdmission(withInfo(hist(burst(0, 5, "n1")...), unknown(m(10), m(11)), unknown(m(12), m(13))), params())
	assert.False(t, info.Valid, "counted as admitted, the unknown operations exceed the bound")
	assert.Equal(t, int64(5), info.Summary["admitted_tokens"])
	assert.Equal(t, int64(2), info.Summary["unknown_tokens"])
	assert.Equal(t, 1, info.Summary["violating_keys_only_with_unknown"])
	assert.InDelta(t, 5/5.004, info.Summary["worst_ratio_definite"], 1e-9)
	assert.Greater(t, info.Summary["worst_excess_tokens"], 1.9)
}

func TestPolicyChanges(t *testing.T) {
	raise := policyChange(bucket.DefaultTierName, 100*msec, 200*msec, 10, "1")
	unacked := raise
	unacked.Acked = false
	again := policyChange(bucket.DefaultTierName, 300*msec, 400*msec, 20, "1")
	proKey := params()
	proKey.Tiers = map[string]bucket.Policy{"pro": free}
	proKey.KeyTiers = map[string]string{"a": "pro"}
	runCases(t, PolicyChanges, []checkCase{
		{name: "new limit after the ack, either while it is applied", valid: true, h: withChanges(hist(
			allowed(0, msec, 0, 4),
			allowed(150*msec, 160*msec, 155*msec, 3),
			with(allowed(170*msec, 180*msec, 175*msec, 2), limit(10)),
			with(allowed(250*msec, 260*msec, 255*msec, 2), limit(10), node("n2")),
		), raise)},
		{name: "lost policy change: old limit after the ack", failure: `was changed to capacity 10`, h: withChanges(hist(
			allowed(0, msec, 0, 4),
			with(allowed(250*msec, 260*msec, 255*msec, 2), limit(10)),
			with(allowed(270*msec, 280*msec, 275*msec, 1), node("n3")),
		), raise)},
		{name: "new limit before the change was sent", failure: "no policy with capacity 10", h: withChanges(hist(
			with(allowed(0, msec, 0, 4), limit(10)),
		), raise)},
		{name: "unacked change: either limit", valid: true, h: withChanges(hist(
			allowed(250*msec, 260*msec, 255*msec, 4),
			with(allowed(270*msec, 280*msec, 275*msec, 3), limit(10)),
		), unacked)},
		{name: "a later change supersedes an earlier one", valid: true, h: withChanges(hist(
			with(allowed(250*msec, 260*msec, 255*msec, 4), limit(10)),
			with(allowed(450*msec, 460*msec, 455*msec, 3), limit(20)),
		), raise, again)},
		{name: "back to the superseded policy", failure: "was changed to capacity 20", h: withChanges(hist(
			with(allowed(450*msec, 460*msec, 455*msec, 3), limit(10)),
		), raise, again)},
		{name: "changes to another tier do not apply", valid: true, h: withChanges(hist(
			allowed(250*msec, 260*msec, 255*msec, 4),
		), policyChange("pro", 100*msec, 200*msec, 10, "1"))},
		{name: "decided under another tier than the key's", p: &proKey, failure: `decided under tier "default", but the key is assigned to tier "pro"`,
			h: hist(allowed(0, msec, 0, 4))},
	})
	res := PolicyChanges(withChanges(hist(
		allowed(250*msec, 260*msec, 255*msec, 2),
		with(allowed(270*msec, 280*msec, 275*msec, 1), node("n3")),
	), raise), params())
	assert.Equal(t, 1, res.Summary["stale_on_n1"])
	assert.Equal(t, 1, res.Summary["stale_on_n3"])
}

func TestAvailability(t *testing.T) {
	nemesis := func(h history.History, start, stop time.Duration) history.History {
		h.Events = append(h.Events,
			history.Event{Time: at(start), Kind: history.KindNemesis, Name: "kill n1", Phase: history.PhaseStart},
			history.Event{Time: at(stop), Kind: history.KindNemesis, Name: "kill n1", Phase: history.PhaseStop})
		return h
	}
	failed := func(inv, done time.Duration) history.Op { return with(unknown(inv, done), key("a")) }
	strict := params()
	strict.MaxRecovery = 100 * msec
	runCases(t, Availability, []checkCase{
		{name: "no faults", valid: true, h: hist(burst(0, 5, "n1")...)},
		{name: "recovers at once", p: &strict, valid: true, h: nemesis(hist(
			allowed(0, msec, 0, 4), failed(10*msec, 500*msec), allowed(1010*msec, 1020*msec, 1015*msec, 3),
		), 5*msec, 1000*msec)},
		{name: "recovers too slowly", p: &strict, failure: "longer than 100ms", h: nemesis(hist(
			allowed(0, msec, 0, 4), failed(1001*msec, 1100*msec), allowed(1200*msec, 1300*msec, 1250*msec, 3),
		), 5*msec, 1000*msec)},
		{name: "a key first asked about long after the heal", p: &strict, valid: true, h: nemesis(hist(
			allowed(0, msec, 0, 4), allowed(5000*msec, 5010*msec, 5005*msec, 3),
		), 5*msec, 1000*msec)},
		{name: "never recovers", failure: "no ok answer after the last heal", h: nemesis(hist(
			allowed(0, msec, 0, 4), failed(1001*msec, 1100*msec), failed(1200*msec, 1300*msec),
		), 5*msec, 1000*msec)},
	})
	res := Availability(nemesis(hist(
		allowed(0, msec, 0, 4), failed(10*msec, 20*msec), allowed(30*msec, 40*msec, 35*msec, 3),
		allowed(1010*msec, 1020*msec, 1015*msec, 2),
	), 5*msec, 1000*msec), params())
	require.True(t, res.Valid, res.Failures)
	assert.Equal(t, 2, res.Summary["ops_during_faults"])
	assert.Equal(t, 0.5, res.Summary["availability_during_faults"])
	assert.Equal(t, 1.0, res.Summary["availability_outside_faults"])
	assert.Equal(t, 10.0, res.Summary["recovery_max_ms"], "from the key's first request after the heal")

	// Per call: the failed attempt and its ok retry (same request id) are
	// one call, decided; a call whose only attempt failed is not.
	calls := hist(
		with(failed(10*msec, 20*msec), reqID("r1")), with(allowed(30*msec, 40*msec, 35*msec, 3), reqID("r1")),
		with(failed(50*msec, 60*msec), reqID("r2")),
		with(allowed(1010*msec, 1020*msec, 1015*msec, 2), reqID("r3")),
		failed(70*msec, 80*msec), // no request id: not a client call
	)
	calls.Ops[1].Process = calls.Ops[0].Process // the retry of the first
	retried := Availability(nemesis(calls, 5*msec, 1000*msec), params())
	assert.Equal(t, 4, retried.Summary["ops_during_faults"])
	assert.Equal(t, 2, retried.Summary["calls_during_faults"])
	assert.Equal(t, 1, retried.Summary["calls_decided_during_faults"])
	assert.Equal(t, 0.5, retried.Summary["call_availability_during_faults"])
	assert.Equal(t, 1, retried.Summary["calls_outside_faults"])
	assert.Equal(t, 1, retried.Summary["calls_decided_within_1s_during_faults"], "r1 was decided 30 ms after its first attempt")
	assert.Equal(t, 10_000.0, Availability(hist(burst(0, 1, "n1")...), Params{}).Summary["max_recovery_ms"], "default limit")
}

func TestFaultedNodes(t *testing.T) {
	three := []string{"n1", "n2", "n3"}
	five := []string{"n1", "n2", "n3", "n4", "n5"}
	iv := func(detail map[string]string) history.Interval { return history.Interval{Detail: detail} }
	for _, tc := range []struct {
		detail map[string]string
		all    []string
		want   []string
	}{
		{map[string]string{"nodes": "n3", "signal": "KILL"}, three, []string{"n3"}},
		{map[string]string{"nodes": "n1,n4"}, five, []string{"n1", "n4"}},
		{map[string]string{"node": "n2", "offset_ns": "250000000"}, three, []string{"n2"}},
		{map[string]string{"cut": "n1|n2,n2|n3"}, three, []string{"n2"}},                              // one isolated
		{map[string]string{"cut": "n1|n3,n1|n4,n2|n3,n2|n4,n1|n5,n2|n5"}, five, []string{"n1", "n2"}}, // halves: the minority
		{map[string]string{"cut": "n1|n3,n1|n4,n2|n4,n2|n5,n3|n5"}, five, nil},                        // a ring: everyone reaches a majority
		{map[string]string{"cut": "n1|n2"}, nil, nil},                                                 // no node ids
		{nil, three, nil},
	} {
		assert.Equal(t, tc.want, faultedNodes(iv(tc.detail), tc.all), "%v", tc.detail)
	}
}

func TestWellFormed(t *testing.T) {
	runCases(t, WellFormed, []checkCase{
		{name: "well formed", valid: true, h: hist(burst(0, 5, "n1")...)},
		{name: "empty history", failure: "nothing to check", h: history.History{}},
		{name: "only failures", failure: "nothing to check", h: hist(with(allowed(0, msec, 0, 4), outcome(history.OutcomeFail)))},
		{name: "malformed op", failure: "before it is invoked", h: hist(allowed(msec, 0, 0, 4))},
		{name: "ok without a stamp", failure: "without a stamp", h: hist(with(allowed(0, msec, 0, 4), func(op *history.Op) { op.Stamp = 0 }))},
		{name: "acked policy change that does not parse", failure: "acked policy change", h: withChanges(hist(burst(0, 1, "n1")...),
			policyChange("pro", 0, msec, 5, "1/3"))},
		{name: "bad params", p: &Params{}, failure: "default policy", h: hist(burst(0, 1, "n1")...)},
	})
}

func TestCheckAll(t *testing.T) {
	good := CheckAll(hist(burst(0, 5, "n1")...), params())
	require.Len(t, good, 9)
	assert.True(t, Valid(good))
	var names []string
	for _, r := range good {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{"history", "linearizable", "duplicates", "stamps", "over-admission", "window", "accounting", "policy", "availability"}, names)

	bad := CheckAll(hist(append(burst(0, 5, "n1"), burst(20*msec, 5, "n2")...)...), params())
	assert.False(t, Valid(bad))
	assert.False(t, bad[1].Valid, "linearizable")
	assert.False(t, bad[4].Valid, "over-admission")
}

// TestAvailabilityPerNemesis checks the per-attempt figures per nemesis
// kind on a hand-built history: every attempt (retries, refusals and
// unknown outcomes included) counts once for each kind whose interval
// contains its invoke, and once overall.
func TestAvailabilityPerNemesis(t *testing.T) {
	ev := func(name, phase string, d time.Duration) history.Event {
		return history.Event{Time: at(d), Kind: history.KindNemesis, Name: name, Phase: phase, Detail: map[string]string{"nodes": "n1"}}
	}
	attempt := func(inv, done time.Duration, o string, n string) history.Op {
		op := with(unknown(inv, done), outcome(o), node(n), reqID(fmt.Sprintf("r%d", inv/msec)))
		if o == history.OutcomeOK {
			op = with(allowed(inv, done, inv, 4), node(n))
		}
		return op
	}
	ok, fail, info := history.OutcomeOK, history.OutcomeFail, history.OutcomeInfo
	h := hist(
		attempt(0, msec, ok, "n1"), // before any fault
		// kill [100ms, 1s]: 4 attempts, 2 answered; the two that were not
		// took 1ms (refused at once) and 900ms (held to the deadline).
		attempt(150*msec, 151*msec, fail, "n1"),
		attempt(152*msec, 160*msec, ok, "n2"),
		attempt(200*msec, 1100*msec, info, "n1"),
		attempt(300*msec, 310*msec, ok, "n3"),
		// partition-leader [2s, 3s] overlapping clock-bump [2.5s, 4s]
		attempt(2100*msec, 2110*msec, ok, "n2"),
		attempt(2200*msec, 2300*msec, fail, "n1"),
		attempt(2600*msec, 2610*msec, ok, "n2"), // in both
		attempt(3500*msec, 3510*msec, ok, "n3"), // clock-bump only
		attempt(5000*msec, 5010*msec, ok, "n1"), // after every fault
	)
	h.Events = []history.Event{
		ev("kill", history.PhaseStart, 100*msec), ev("kill", history.PhaseStop, 1000*msec),
		ev("partition-leader", history.PhaseStart, 2000*msec), ev("clock-bump", history.PhaseStart, 2500*msec),
		ev("partition-leader", history.PhaseStop, 3000*msec), ev("clock-bump", history.PhaseStop, 4000*msec),
	}
	res := Availability(h, params())
	require.True(t, res.Valid, res.Failures)
	s := res.Summary
	assert.Equal(t, 8, s["ops_during_faults"], "each attempt once overall")
	assert.Equal(t, 5, s["ok_during_faults"])
	assert.Equal(t, 5.0/8, s["availability_during_faults"])

	assert.Equal(t, 4, s["attempts_during_kill"])
	assert.Equal(t, 2, s["answered_during_kill"])
	assert.Equal(t, 0.5, s["availability_during_kill"])
	assert.Equal(t, 900.0, s["unanswered_max_ms_during_kill"])
	assert.Equal(t, 900.0, s["unanswered_p50_ms_during_kill"], "upper median of 1ms and 900ms")

	assert.Equal(t, 3, s["attempts_during_partition-leader"])
	assert.Equal(t, 2, s["answered_during_partition-leader"])
	assert.Equal(t, 2.0/3, s["availability_during_partition-leader"])
	assert.Equal(t, 100.0, s["unanswered_max_ms_during_partition-leader"])

	assert.Equal(t, 2, s["attempts_during_clock-bump"])
	assert.Equal(t, 2, s["answered_during_clock-bump"])
	assert.Equal(t, 1.0, s["availability_during_clock-bump"])
	assert.NotContains(t, s, "unanswered_max_ms_during_clock-bump", "nothing unanswered")

	assert.Equal(t, 2, s["ops_outside_faults"])
	assert.Equal(t, 1.0, s["availability_outside_faults"])

	assert.NotContains(t, s, "to_faulted_during_kill", "no node ids: not counted")

	// With the node ids: of the kill's attempts two went to the killed n1,
	// none answered; n1 is the one cut off by the partition too.
	h.Events[2].Detail = map[string]string{"cut": "n1|n2,n1|n3"}
	p := params()
	p.NodeIDs = map[string]string{"n1": "n1", "n2": "n2", "n3": "n3"}
	s = Availability(h, p).Summary
	assert.Equal(t, 2, s["to_faulted_during_kill"])
	assert.Equal(t, 0, s["answered_to_faulted_during_kill"])
	assert.Equal(t, 1, s["to_faulted_during_partition-leader"])
	assert.Equal(t, 0, s["answered_to_faulted_during_partition-leader"])
	assert.Equal(t, 0, s["to_faulted_during_clock-bump"], "its detail names n1, no attempt went there")

	// A kind whose faults saw no attempt reports 0 of 0 as fully available.
	h.Events = append(h.Events, ev("pause", history.PhaseStart, 10*time.Second), ev("pause", history.PhaseStop, 11*time.Second))
	s = Availability(h, params()).Summary
	assert.Equal(t, 0, s["attempts_during_pause"])
	assert.Equal(t, 1.0, s["availability_during_pause"])
}
