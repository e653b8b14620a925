package checker

import (
	"testing"
	"time"

	"github.com/quorate/quorate/jepsen/history"
)

// TestOverAdmissionCountsEveryAdmission: admissions count at their decision
// stamps, however long their operations took, and unknown outcomes count as
// admitted.
func TestOverAdmissionCountsEveryAdmission(t *testing.T) {
	// long returns n admissions whose operations each took from 0 to 6 s
	// (retried across a failover), decided 1 ms apart from stamp from.
	long := func(from time.Duration, n int, left int64) []history.Op {
		var ops []history.Op
		for i := range n {
			ops = append(ops, allowed(0, 6*time.Second, from+time.Duration(i)*msec, left-int64(i)))
		}
		return ops
	}
	runCases(t, OverAdmission, []checkCase{
		{name: "twice the bucket within 15 ms, in long operations", failure: "10 tokens admitted", h: hist(
			append(long(0, 5, 4), long(10*msec, 5, 4)...)...)},
		{name: "the bucket once, in long operations", valid: true, h: hist(long(0, 5, 4)...)},
		{name: "unknown outcomes count as admitted", failure: "2 of them unknown", h: hist(
			append(burst(0, 5, "n1"), unknown(10*msec, 11*msec), unknown(12*msec, 13*msec))...)},
		{name: "an orphaned duplicate is an admission", failure: "6 tokens admitted", h: hist(
			append(burst(0, 5, "n1"),
				with(unknown(10*msec, 11*msec), reqID("r9"), outcome(history.OutcomeFail)),
				with(allowed(20*msec, 21*msec, 10500*time.Microsecond, 0), reqID("r9"), duplicate()))...)},
	})
}
