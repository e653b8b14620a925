package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// t0 is an arbitrary fixed start (ns since the epoch); at(d) is t0 + d.
const t0 = int64(1_700_000_000) * int64(time.Second)

func at(d time.Duration) int64 { return t0 + int64(d) }

const msec = time.Millisecond

// free is DESIGN §1's example policy: capacity 5, 1 token per second.
var free = bucket.Policy{Capacity: 5, Rate: 1 * bucket.Scale}

// params checks against free with exact clocks (no slack, no skew).
func params() Params {
	return Params{Default: free, ClockSlack: -1, Skew: -1, MaxRecovery: -1, Timeout: 10 * time.Second}
}

// allowed and denied build ok cost-1 decisions on key "a" via n1 under
// free: invoked at inv, completed at done, decided at stamp.
func allowed(inv, done, stamp time.Duration, remaining int64) history.Op {
	return history.Op{Key: "a", Node: "n1", Kind: history.KindAllow, Cost: 1, Invoke: at(inv), Complete: at(done),
		Outcome: history.OutcomeOK, Allowed: true, Remaining: remaining, Limit: 5, Tier: bucket.DefaultTierName, Stamp: at(stamp)}
}

func denied(inv, done, stamp time.Duration, remaining int64) history.Op {
	op := allowed(inv, done, stamp, remaining)
	op.Allowed = false
	return op
}

// read is an ok GET of key "a".
func read(inv, done, stamp time.Duration, remaining int64) history.Op {
	op := allowed(inv, done, stamp, remaining)
	op.Kind, op.Allowed, op.Cost = history.KindRead, false, 0
	return op
}

// unknown is an info cost-1 allow on key "a".
func unknown(inv, done time.Duration) history.Op {
	return history.Op{Key: "a", Node: "n1", Kind: history.KindAllow, Cost: 1, Invoke: at(inv), Complete: at(done), Outcome: history.OutcomeInfo}
}

// with applies fs to op.
func with(op history.Op, fs ...func(*history.Op)) history.Op {
	for _, f := range fs {
		f(&op)
	}
	return op
}

func node(n string) func(*history.Op)     { return func(op *history.Op) { op.Node = n } }
func key(k string) func(*history.Op)      { return func(op *history.Op) { op.Key = k } }
func limit(l int64) func(*history.Op)     { return func(op *history.Op) { op.Limit = l } }
func cost(c int64) func(*history.Op)      { return func(op *history.Op) { op.Cost = c } }
func reqID(id string) func(*history.Op)   { return func(op *history.Op) { op.RequestID = id } }
func duplicate() func(*history.Op)        { return func(op *history.Op) { op.Duplicate = true } }
func outcome(o string) func(*history.Op)  { return func(op *history.Op) { op.Outcome = o } }
func remaining(r int64) func(*history.Op) { return func(op *history.Op) { op.Remaining = r } }
func stampAt(d time.Duration) func(*history.Op) {
	return func(op *history.Op) { op.Stamp = at(d) }
}

// hist numbers the ops' processes in order and returns a history.
func hist(ops ...history.Op) history.History {
	for i := range ops {
		ops[i].Process = i
	}
	return history.History{Ops: ops}
}

// burst is n cost-1 admissions of a full free bucket, one per millisecond
// from start via node, the last one leaving 5-n.
func burst(start time.Duration, n int, via string) []history.Op {
	var ops []history.Op
	for i := range n {
		t := start + time.Duration(i)*msec
		ops = append(ops, with(allowed(t, t+msec/2, t+msec/4, int64(4-i)), node(via)))
	}
	return ops
}

// policyChange is an acked change of tier at [inv, ack].
func policyChange(tier string, inv, ack time.Duration, capacity int64, rate string) history.Policy {
	return history.Policy{Time: at(ack), Invoke: at(inv), Tier: tier, Capacity: capacity, RatePerSec: rate, Acked: true}
}

// checkCase is one table entry: a history and whether the checker must
// accept it; failure, if set, must appear in some failure message.
type checkCase struct {
	name    string
	h       history.History
	p       *Params
	valid   bool
	failure string
}

func runCases(t *testing.T, check func(history.History, Params) Result, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := params()
			if tc.p != nil {
				p = *tc.p
			}
			res := check(tc.h, p)
			require.Equal(t, tc.valid, res.Valid, "%s = %v, want %v; failures:\n%s", res.Name, res.Valid, tc.valid, strings.Join(res.Failures, "\n"))
			if !tc.valid {
				assert.NotEmpty(t, res.Failures)
				assert.Positive(t, res.Summary["failures"])
			}
			if tc.failure != "" {
				assert.Contains(t, strings.Join(res.Failures, "\n"), tc.failure)
			}
		})
	}
}
