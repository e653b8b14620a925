package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/quorate/quorate/jepsen/checker"
	"github.com/quorate/quorate/jepsen/runner"
)

// soakRow sums up the runs of one mix: how many runs each checker that
// judges correctness rejected, the worst over-admission ratios, the worst
// accounting discrepancy, and the unknown rate.
type soakRow struct {
	mix                           string
	runs, passed                  int
	lin, bound, dups, acct, other int // runs each checker (or any other) rejected
	worstRatio, worstDefinite     float64
	worstUnexplained, worstLost   int64
	ops, unknown                  int
	worstUnknownRate              float64
}

// soakTable is the summary of a soak, one row per mix in the order first
// seen.
type soakTable struct{ rows []*soakRow }

func (t *soakTable) add(s runner.Summary) {
	var row *soakRow
	for _, r := range t.rows {
		if r.mix == s.Name {
			row = r
		}
	}
	if row == nil {
		row = &soakRow{mix: s.Name}
		t.rows = append(t.rows, row)
	}
	row.runs++
	if s.Valid {
		row.passed++
	}
	row.ops += s.Ops
	row.unknown += s.Info
	row.worstUnknownRate = max(row.worstUnknownRate, s.InfoFraction)
	for _, r := range s.Results {
		switch r.Name {
		case "linearizable":
			row.lin += bad(r)
		case "over-admission":
			row.bound += bad(r)
			row.worstRatio = max(row.worstRatio, num(r, "worst_ratio"))
			row.worstDefinite = max(row.worstDefinite, num(r, "worst_ratio_definite"))
		case "duplicates":
			row.dups += bad(r)
		case "accounting":
			row.acct += bad(r)
			row.worstUnexplained = max(row.worstUnexplained, int64(num(r, "worst_unexplained_tokens")))
			row.worstLost = max(row.worstLost, int64(num(r, "worst_lost_tokens")))
		default:
			row.other += bad(r)
		}
	}
}

func bad(r checker.Result) int {
	if r.Valid {
		return 0
	}
	return 1
}

// num reads a summary number, whichever numeric type it was stored as (a
// Summary read back from JSON holds float64s).
func num(r checker.Result, key string) float64 {
	switch v := r.Summary[key].(type) {
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case float64:
		return v
	}
	return 0
}

func (t *soakTable) print(w io.Writer) {
	fmt.Fprintln(w, "\n== soak: runs per mix, and how many each checker rejected (0 expected everywhere)")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mix\truns\tpass\tlinearizable\tbound\tduplicates\taccounting\tother\tworst ratio\tworst ratio (acked)\tacct unexplained / lost\tunknown ops\tworst unknown rate\t")
	for _, r := range t.rows {
		rate := 0.0
		if r.ops > 0 {
			rate = float64(r.unknown) / float64(r.ops)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\t%.4f\t%d / %d\t%d (%.3f%%)\t%.3f%%\t\n",
			r.mix, r.runs, r.passed, r.lin, r.bound, r.dups, r.acct, r.other, r.worstRatio, r.worstDefinite,
			r.worstUnexplained, r.worstLost, r.unknown, 100*rate, 100*r.worstUnknownRate)
	}
	tw.Flush()
}
