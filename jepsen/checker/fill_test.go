package checker

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// Fill on raise: key "a" starts in tier "small" (capacity 5, no refill),
// key "b" in "big" (capacity 20, no refill); "small" may be raised with
// on_raise fill.
func fillParams() *Params {
	p := tierParams("small")
	p.KeyTiers["b"] = "big"
	return p
}

// drained is five admissions of "a" in "small", the last leaving 0.
func drained() []history.Op {
	var ops []history.Op
	for i := range 5 {
		t := time.Duration(i) * msec
		ops = append(ops, with(allowed(t, t+msec/2, t, int64(4-i)), under("small", 5)))
	}
	return ops
}

// raise is an acked change of "small" to capacity c (no refill) at [inv,
// ack], with on_raise onRaise.
func raise(c int64, inv, ack time.Duration, onRaise string) history.Policy {
	p := policyChange("small", inv, ack, c, "0")
	p.OnRaise = onRaise
	return p
}

// after is an admission of key "a" at ms, under "small" at capacity lim,
// leaving left.
func after(ms int, lim, left int64) history.Op {
	t := time.Duration(ms) * msec
	return with(allowed(t, t+msec/2, t, left), under("small", lim))
}

func TestLinearizableFillOnRaise(t *testing.T) {
	fp := fillParams()
	unacked := raise(10, 10*msec, 11*msec, "fill")
	unacked.Acked = false
	runCases(t, Linearizable, []checkCase{
		{name: "a raise with fill refills the drained key", p: fp, valid: true, h: withChanges(hist(append(drained(),
			after(20, 10, 9), after(21, 10, 8))...), raise(10, 10*msec, 11*msec, "fill"))},
		{name: "the fill happens inside the change's interval, not before it", p: fp, failure: "not linearizable", h: withChanges(hist(append(drained(),
			after(8, 10, 9))...), raise(10, 10*msec, 11*msec, "fill"))},
		{name: "a raise that keeps balances refills nothing", p: fp, failure: "not linearizable", h: withChanges(hist(append(drained(),
			after(20, 10, 9))...), raise(10, 10*msec, 11*msec, ""))},
		{name: "one fill, applied twice", p: fp, failure: "not linearizable", h: withChanges(hist(append(append(drained(),
			after(20, 10, 9), after(21, 10, 8), after(22, 10, 7), after(23, 10, 6), after(24, 10, 5),
			after(25, 10, 4), after(26, 10, 3), after(27, 10, 2), after(28, 10, 1), after(29, 10, 0)),
			after(40, 10, 9))...), raise(10, 10*msec, 11*msec, "fill"))},
		{name: "two raises fill twice", p: fp, valid: true, h: withChanges(hist(append(append(drained(),
			after(20, 10, 9), after(21, 10, 8), after(22, 10, 7), after(23, 10, 6), after(24, 10, 5),
			after(25, 10, 4), after(26, 10, 3), after(27, 10, 2), after(28, 10, 1), after(29, 10, 0)),
			after(40, 12, 11))...), raise(10, 10*msec, 11*msec, "fill"), raise(12, 30*msec, 31*msec, "fill"))},
		{name: "a repeated raise to the same capacity fills nothing", p: fp, failure: "not linearizable", h: withChanges(hist(append(append(drained(),
			after(20, 10, 9), after(21, 10, 8), after(22, 10, 7), after(23, 10, 6), after(24, 10, 5),
			after(25, 10, 4), after(26, 10, 3), after(27, 10, 2), after(28, 10, 1), after(29, 10, 0)),
			after(40, 10, 9))...), raise(10, 10*msec, 11*msec, "fill"), raise(10, 30*msec, 31*msec, "fill"))},
		{name: "a lowering with fill fills nothing", p: fp, failure: "not linearizable", h: withChanges(hist(append(drained(),
			after(20, 3, 2))...), raise(3, 10*msec, 11*msec, "fill"))},
		{name: "an unacked fill may have applied", p: fp, valid: true, h: withChanges(hist(append(drained(),
			after(20, 10, 9))...), unacked)},
		{name: "an unacked fill may not have applied", p: fp, valid: true, h: withChanges(hist(append(drained(),
			with(denied(20*msec, 20*msec+msec/2, 20*msec, 0), under("small", 5)))...), unacked)},
		{name: "a filled key then lowered starts full at the lower capacity", p: fp, valid: true, h: withChanges(hist(append(drained(),
			after(30, 7, 6))...), raise(10, 10*msec, 11*msec, "fill"), raise(7, 20*msec, 21*msec, ""))},
		{name: "a filled key's stamps still may not go back", p: fp, failure: "not linearizable", h: withChanges(hist(append(drained(),
			with(after(20, 10, 9), stampAt(3*msec)))...), raise(10, 10*msec, 11*msec, "fill"))},
	})
}

// TestLinearizableFillSparesKeysMovedInLater: key "b", drained in "big",
// is moved to "small" after "small" was raised with fill: it keeps its
// balance (0, no refill). Moved in before the raise, it is filled.
func TestLinearizableFillSparesKeysMovedInLater(t *testing.T) {
	fp := fillParams()
	drainB := func() []history.Op {
		var ops []history.Op
		for i := range 20 {
			t := time.Duration(i) * msec / 4
			ops = append(ops, with(allowed(t, t+msec/8, t, int64(19-i)), key("b"), under("big", 20)))
		}
		return ops
	}
	moveB := func(inv, ack time.Duration) history.Assignment {
		m := moveTo("small", inv, ack)
		m.Key = "b"
		return m
	}
	inSmall := func(ms int, allowedOp bool, left int64) history.Op {
		t := time.Duration(ms) * msec
		op := with(allowed(t, t+msec/2, t, left), key("b"), under("small", 30))
		op.Allowed = allowedOp
		return op
	}
	fill := raise(30, 10*msec, 11*msec, "fill")
	runCases(t, Linearizable, []checkCase{
		{name: "moved in later: not filled", p: fp, valid: true, h: withMoves(withChanges(hist(append(drainB(),
			inSmall(40, false, 0))...), fill), moveB(20*msec, 21*msec))},
		{name: "moved in later, yet filled", p: fp, failure: "not linearizable", h: withMoves(withChanges(hist(append(drainB(),
			inSmall(40, true, 29))...), fill), moveB(20*msec, 21*msec))},
		{name: "moved in before: filled", p: fp, valid: true, h: withMoves(withChanges(hist(append(drainB(),
			inSmall(40, true, 29))...), fill), moveB(6*msec, 7*msec))},
	})
}

// TestOverAdmissionCountsFills: a fill adds a capacity to the bound of the
// windows it may fall in, and only a change made with on_raise fill does.
func TestOverAdmissionCountsFills(t *testing.T) {
	fp := fillParams()
	ops := drained()
	for i := range 10 {
		ops = append(ops, after(20+i, 10, int64(9-i)))
	}
	// 15 admitted within 30 ms: more than the largest capacity, 10, but
	// within 10 + one fill of 10.
	good := OverAdmission(withChanges(hist(ops...), raise(10, 10*msec, 11*msec, "fill")), *fp)
	require.True(t, good.Valid, "%v", good.Failures)
	bad := OverAdmission(withChanges(hist(ops...), raise(10, 10*msec, 11*msec, "")), *fp)
	assert.False(t, bad.Valid)
	outside := OverAdmission(withChanges(hist(ops...), raise(10, 100*msec, 110*msec, "fill")), *fp)
	assert.False(t, outside.Valid, "a fill that cannot fall in the window adds nothing to its bound")
}

// TestLinearizablePeekOfUnknownOutcomeBeforeARateChange: a peek (cost 0)
// takes nothing, but applied before a rate change it refills the time up
// to it at the old rate. The model used to drop such peeks when their
// outcome was unknown, and so rejected this history of a correct server:
// drained at 4 ms under 1 token/s, a peek applied at about 10 ms, the rate
// raised to 2/s at [500, 501] ms, then a denial at 505 ms (0.9998 tokens;
// without the peek it would have been 1.0055, allowed).
func TestLinearizablePeekOfUnknownOutcomeBeforeARateChange(t *testing.T) {
	peek := with(unknown(10*msec, 11*msec), cost(0))
	h := withChanges(hist(append(burst(0, 5, "n1"), peek, denied(505*msec, 506*msec, 505*msec, 0))...),
		policyChange(bucket.DefaultTierName, 500*msec, 501*msec, 5, "2"))
	res := Linearizable(h, params())
	assert.True(t, res.Valid, "%v", res.Failures)
	h.Ops = slices.DeleteFunc(slices.Clone(h.Ops), func(op history.Op) bool { return op.Outcome == history.OutcomeInfo })
	assert.False(t, Linearizable(h, params()).Valid, "without the peek the denial cannot happen")
}
