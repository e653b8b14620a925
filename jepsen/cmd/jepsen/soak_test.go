package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/jepsen/checker"
	"github.com/quorate/quorate/jepsen/runner"
)

func TestSoakTable(t *testing.T) {
	run := func(mix string, ratio float64, unexplained int, unknown int) runner.Summary {
		acct := checker.Result{Name: "accounting", Valid: unexplained == 0, Summary: map[string]any{"worst_unexplained_tokens": unexplained, "worst_lost_tokens": 0}}
		return runner.Summary{Name: mix, Valid: acct.Valid, Ops: 1000, Info: unknown, InfoFraction: float64(unknown) / 1000, Results: []checker.Result{
			{Name: "linearizable", Valid: true},
			{Name: "over-admission", Valid: true, Summary: map[string]any{"worst_ratio": ratio, "worst_ratio_definite": ratio - 0.01}},
			acct,
			{Name: "availability", Valid: true},
		}}
	}
	var tab soakTable
	tab.add(run("crash", 0.91, 0, 0))
	tab.add(run("restart", 0.95, 0, 2))
	tab.add(run("restart", 0.97, 3, 1))
	require.Len(t, tab.rows, 2)
	r := tab.rows[1]
	assert.Equal(t, []int{2, 1, 0, 0, 1, 3}, []int{r.runs, r.passed, r.lin, r.bound, r.acct, r.unknown})
	assert.Equal(t, 0.97, r.worstRatio)
	assert.Equal(t, int64(3), r.worstUnexplained)

	var b strings.Builder
	tab.print(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 4, b.String())
	assert.Regexp(t, `restart\s+2\s+1\s+0\s+0\s+0\s+1\s+0\s+0\.9700\s+0\.9600\s+3 / 0\s+3 \(0\.150%\)\s+0\.200%`, lines[3])
}

func TestPerNemesis(t *testing.T) {
	// As read back from summary.json: every number a float64.
	r := checker.Result{Name: "availability", Valid: true, Summary: map[string]any{
		"attempts_during_kill": 200.0, "answered_during_kill": 190.0, "availability_during_kill": 0.95,
		"unanswered_p50_ms_during_kill": 1000.0, "unanswered_max_ms_during_kill": 1503.0,
		"to_faulted_during_kill": 10.0, "answered_to_faulted_during_kill": 0.0,
		"attempts_during_pause": 10.0, "answered_during_pause": 10.0, "availability_during_pause": 1.0,
		"ops_during_faults": 210.0, "ok_during_faults": 200.0, "availability_during_faults": 200.0 / 210,
		"recovery_max_ms": 12.0,
	}}
	assert.Equal(t, "kill 95.00% (190/200; 5.0% sent to the faulted node, 0 answered; unanswered p50 1000 ms, max 1503 ms), pause 100.00% (10/10), all faults 95.24% (200/210)", perNemesis(r))
	c := compact(r.Summary)
	assert.Contains(t, c, "availability_during_faults=0.9524")
	assert.Contains(t, c, "recovery_max_ms=12")
	assert.NotContains(t, c, "kill")
	assert.Empty(t, perNemesis(checker.Result{Name: "availability", Summary: map[string]any{"ops_during_faults": 0}}))
}
