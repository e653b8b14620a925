package checker

import (
	"testing"
	"time"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

func TestAccounting(t *testing.T) {
	// Key "a" in tier "acct": 100 tokens that never refill.
	acct := params()
	acct.Tiers = map[string]bucket.Policy{"acct": {Capacity: 100}}
	acct.KeyTiers = map[string]string{"a": "acct"}
	acct.AccountKeys = []string{"a"}
	refilling := acct
	refilling.Tiers = map[string]bucket.Policy{"acct": free}
	// admit is an acknowledged admission of cost c at d, leaving left.
	admit := func(d time.Duration, c, left int64) history.Op {
		return with(allowed(d, d+msec, d+msec/2, left), limit(100), cost(c), func(op *history.Op) { op.Tier = "acct" })
	}
	// final reads the balance at d.
	final := func(d time.Duration, left int64) history.Op {
		return with(read(d, d+msec, d+msec/2, left), limit(100), func(op *history.Op) { op.Tier = "acct" })
	}
	lost := with(unknown(10*msec, 20*msec), cost(2))
	said503 := with(unknown(30*msec, 31*msec), outcome(history.OutcomeFail), func(op *history.Op) { op.Status, op.Error = 503, "shutting_down" })
	runCases(t, Accounting, []checkCase{
		{name: "every token accounted for", p: &acct, valid: true, h: hist(
			admit(0, 1, 99), admit(2*msec, 2, 97), final(time.Second, 97))},
		{name: "unknown operations may or may not have taken theirs", p: &acct, valid: true, h: hist(
			admit(0, 1, 99), lost, admit(40*msec, 1, 96), final(time.Second, 96))},
		{name: "...but no more", p: &acct, failure: "1 tokens taken by requests answered as denied or never decided", h: hist(
			admit(0, 1, 99), lost, admit(40*msec, 1, 95), final(time.Second, 95))},
		{name: "a 503 that promised nothing took a token", p: &acct, failure: "but acknowledged admissions took 2 and operations of unknown outcome asked for 0", h: hist(
			admit(0, 1, 99), said503, admit(40*msec, 1, 97), final(time.Second, 97))},
		{name: "an acknowledged admission was lost", p: &acct, failure: "1 acknowledged tokens lost", h: hist(
			admit(0, 1, 99), admit(2*msec, 1, 98), final(time.Second, 99))},
		{name: "no final read", p: &acct, failure: "no read of the final balance", h: hist(
			admit(0, 1, 99), final(time.Second, 99), admit(2*time.Second, 1, 98))},
		{name: "a refilling policy cannot be accounted", p: &refilling, failure: "rate 0", h: hist(
			admit(0, 1, 99), final(time.Second, 99))},
		{name: "keys not listed are left alone", valid: true, h: hist(burst(0, 5, "n1")...)},
	})
}
