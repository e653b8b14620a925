package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// Tier assignments: key "a" starts in tier "small" (capacity 5, no refill)
// and may be moved to "big" (capacity 20, no refill).
var (
	smallPol = bucket.Policy{Capacity: 5}
	bigPol   = bucket.Policy{Capacity: 20}
)

func tierParams(initial string) *Params {
	p := params()
	p.Tiers = map[string]bucket.Policy{"small": smallPol, "big": bigPol}
	p.KeyTiers = map[string]string{"a": initial}
	return &p
}

// under sets the tier and limit an answer reports.
func under(tier string, lim int64) func(*history.Op) {
	return func(op *history.Op) { op.Tier, op.Limit = tier, lim }
}

// moveTo is a tier assignment of key "a" invoked at inv and acked at ack.
func moveTo(tier string, inv, ack time.Duration) history.Assignment {
	return history.Assignment{Invoke: at(inv), Time: at(ack), Key: "a", Tier: tier, Acked: true}
}

func withMoves(h history.History, moves ...history.Assignment) history.History {
	h.Assignments = moves
	return h
}

// moved is three admissions in "small" (2 left), then key "a" is moved to
// "big" during [10ms, 20ms], then one admission at 30ms whose answer is
// given by after.
func moved(after ...func(*history.Op)) history.History {
	return withMoves(hist(
		with(allowed(0, msec/2, 0, 4), under("small", 5)),
		with(allowed(msec, 3*msec/2, msec, 3), under("small", 5)),
		with(allowed(2*msec, 5*msec/2, 2*msec, 2), under("small", 5)),
		with(allowed(30*msec, 31*msec, 30*msec, 1), append([]func(*history.Op){under("big", 20)}, after...)...),
	), moveTo("big", 10*msec, 20*msec))
}

func TestLinearizableAssignments(t *testing.T) {
	unacked := moveTo("big", 10*msec, 20*msec)
	unacked.Acked = false
	late := withMoves(hist(
		with(allowed(0, msec, 0, 4), under("small", 5)),
		// After the give-up, still in "small": the move has not applied yet.
		with(allowed(30*msec, 31*msec, 30*msec, 3), under("small", 5)),
		// Later it has: the balance carries over.
		with(allowed(50*msec, 51*msec, 50*msec, 2), under("big", 20)),
	), unacked)
	runCases(t, Linearizable, []checkCase{
		{name: "balance carries over to the bigger tier", p: tierParams("small"), valid: true, h: moved()},
		{name: "no gift of fresh tokens after the move", p: tierParams("small"), valid: false, h: moved(remaining(19)), failure: "not linearizable"},
		{name: "new tier's limit before the move is invoked", p: tierParams("small"), valid: false, h: withMoves(hist(
			with(allowed(0, msec, 0, 19), under("big", 20)),
		), moveTo("big", 10*msec, 20*msec))},
		{name: "old tier's limit after the ack", p: tierParams("small"), valid: false, h: moved(limit(5))},
		{name: "moving to a smaller tier clamps", p: tierParams("big"), valid: true, h: withMoves(hist(
			with(allowed(0, msec, 0, 19), under("big", 20)),
			with(allowed(30*msec, 31*msec, 30*msec, 4), under("small", 5)),
		), moveTo("small", 10*msec, 20*msec))},
		{name: "unacked move that took effect late", p: tierParams("small"), valid: true, h: late},
		{name: "a change of the other tier applies once the key is in it", p: tierParams("small"), valid: true,
			h: withChanges(moved(limit(30)), policyChange("big", 3*msec, 4*msec, 30, "0"))},
		{name: "a change of the other tier does not touch the key before the move", p: tierParams("small"), valid: false,
			h: withChanges(withMoves(hist(
				with(allowed(0, msec, 0, 4), under("small", 5)),
				with(allowed(30*msec, 31*msec, 30*msec, 3), under("small", 1)),
			), moveTo("big", 40*msec, 50*msec)), policyChange("big", 3*msec, 4*msec, 1, "0"))},
		{name: "a change of the old tier after the move does not touch the key", p: tierParams("small"), valid: true,
			h: withChanges(moved(), policyChange("small", 25*msec, 26*msec, 1, "0"))},
	})
}

func TestPolicyChangesAssignments(t *testing.T) {
	unacked := moveTo("big", 10*msec, 20*msec)
	unacked.Acked = false
	runCases(t, PolicyChanges, []checkCase{
		{name: "new tier after the ack", p: tierParams("small"), valid: true, h: moved()},
		{name: "old tier's limit after the ack", p: tierParams("small"), valid: false, h: moved(limit(5)), failure: "no policy with capacity 5"},
		{name: "old tier named after the ack", p: tierParams("small"), valid: false, h: moved(under("small", 5)), failure: `assigned to tier "big"`},
		{name: "either tier while the move is in flight", p: tierParams("small"), valid: true, h: withMoves(hist(
			with(allowed(11*msec, 12*msec, 11*msec, 4), under("small", 5)),
			with(allowed(13*msec, 14*msec, 13*msec, 3), under("big", 20)),
		), moveTo("big", 10*msec, 20*msec))},
		{name: "limit must be the named tier's", p: tierParams("small"), valid: false, h: withMoves(hist(
			with(allowed(11*msec, 12*msec, 11*msec, 4), under("small", 20)),
		), moveTo("big", 10*msec, 20*msec))},
		{name: "new tier before the move is invoked", p: tierParams("small"), valid: false, h: withMoves(hist(
			with(allowed(0, msec, 0, 4), under("big", 20)),
		), moveTo("big", 10*msec, 20*msec))},
		{name: "unacked move that took effect late", p: tierParams("small"), valid: true, h: withMoves(hist(
			with(allowed(30*msec, 31*msec, 30*msec, 4), under("small", 5)),
			with(allowed(50*msec, 51*msec, 50*msec, 3), under("big", 20)),
		), unacked)},
	})
}

func TestOverAdmissionAssignments(t *testing.T) {
	// 12 admissions in 12ms: over small's bound of 5, within big's 20.
	var ops []history.Op
	for i := range 12 {
		d := time.Duration(i) * msec
		ops = append(ops, with(allowed(d, d+msec/2, d+msec/4, 0), under("small", 5)))
	}
	runCases(t, OverAdmission, []checkCase{
		{name: "static tier", p: tierParams("small"), valid: false, h: hist(ops...)},
		{name: "larger tier across the move", p: tierParams("small"), valid: true, h: withMoves(hist(ops...), moveTo("big", 5*msec, 6*msec))},
		{name: "unacked move counts too", p: tierParams("small"), valid: true, h: withMoves(hist(ops...), history.Assignment{Invoke: at(5 * msec), Time: at(6 * msec), Key: "a", Tier: "big"})},
		{name: "move after the window", p: tierParams("small"), valid: false, h: withMoves(hist(ops...), moveTo("big", time.Second, time.Second+msec))},
	})
	res := OverAdmission(withMoves(hist(ops...), moveTo("big", 5*msec, 6*msec)), *tierParams("small"))
	assert.True(t, res.Valid)
}

func TestKeyTierIgnoresAnswersAfterAMove(t *testing.T) {
	p := params()
	p.Tiers = map[string]bucket.Policy{"small": smallPol, "big": bigPol}
	// No KeyTiers: the initial tier is guessed from answers before the
	// first move only; after it, the default.
	h := withMoves(hist(with(allowed(30*msec, 31*msec, 30*msec, 19), under("big", 20))), moveTo("big", 10*msec, 20*msec))
	prep := prepare(h, p)
	assert.Equal(t, bucket.DefaultTierName, prep.keys[0].tier)
	assert.True(t, Linearizable(h, p).Valid)
}
