package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report is the JSON that "loadgen report -out" writes.
type report struct {
	GeneratedAt time.Time     `json:"generated_at"`
	CPUs        int           `json:"cpus"`
	Ceiling     string        `json:"ceiling_label"`
	Runs        []reportedRun `json:"runs"`
}

// reportedRun is one run with its throughput relative to the ceiling's
// under the same workload (connections, keys, batch).
type reportedRun struct {
	result
	CeilingRatio    *float64 `json:"ceiling_ratio,omitempty"`
	CeilingP99Ratio *float64 `json:"ceiling_p99_ratio,omitempty"`
	// Repeats is the decisions/s of every run of this target under this
	// workload, in the order they ran, when it ran more than once; the
	// row itself is the run of median throughput.
	Repeats []float64 `json:"repeats,omitempty"`
	// RepeatP99s is the p99 of each of those runs, in µs.
	RepeatP99s []int64 `json:"repeat_p99_micros,omitempty"`
}

// workload is what makes two runs comparable.
type workload struct{ conns, keys, batch int }

func workloadOf(r result) workload { return workload{r.Connections, r.Keys, r.Batch} }

// medians makes the runs of one label under one workload one row, the
// run of median throughput (the lower of the two middle ones when there
// is an even number), in the place of the first of them, with the failed
// calls of all of them (and the first error any saw), so that no run's
// failures are hidden. A single run carries no Repeats.
func medians(runs []reportedRun) []reportedRun {
	type row struct {
		label string
		w     workload
	}
	var order []row
	by := map[row][]reportedRun{}
	for _, r := range runs {
		k := row{cmp.Or(r.Label, r.Mode), workloadOf(r.result)}
		if _, seen := by[k]; !seen {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	out := make([]reportedRun, 0, len(order))
	for _, k := range order {
		rs := by[k]
		if len(rs) == 1 {
			out = append(out, rs[0])
			continue
		}
		repeats := make([]float64, len(rs))
		p99s := make([]int64, len(rs))
		for i, r := range rs {
			repeats[i] = r.PerSecond
			p99s[i] = r.P99Micros
		}
		sorted := slices.Clone(rs)
		slices.SortStableFunc(sorted, func(a, b reportedRun) int { return cmp.Compare(a.PerSecond, b.PerSecond) })
		m := sorted[(len(sorted)-1)/2]
		m.Repeats = repeats
		m.RepeatP99s = p99s
		m.Errors = 0
		for _, r := range rs {
			m.Errors += r.Errors
			m.FirstErrText = cmp.Or(m.FirstErrText, r.FirstErrText)
		}
		out = append(out, m)
	}
	return out
}

// An alternation is a pair of rows bench-peers runs in turn, several
// times, on the same nodes: the row labelled base+over and the one
// labelled base+under. Run i of one is compared with run i of the other.
type alternation struct {
	over, under string
	title       string
}

var alternations = []alternation{
	{", gRPC", "", "gRPC ÷ HTTP, run by run (each gRPC run right after its HTTP run, on the same nodes):"},
	{", client, coalesced", ", client",
		"Go client, coalesced ÷ one call a decision, run by run (each one-call run right after its coalesced run, on the same nodes), and the same for p99:"},
}

// writeAlternated prints, for every pair of alternated rows run as many
// times as each other (same base label, same workload), the ratio of each
// run of the one to the run of the other it was paired with, and their
// median; and the same for p99.
func writeAlternated(w io.Writer, runs []reportedRun) {
	byLabel := map[string]reportedRun{}
	for _, r := range runs {
		byLabel[fmt.Sprint(r.Label, workloadOf(r.result))] = r
	}
	for _, a := range alternations {
		header := false
		for _, o := range runs {
			base, ok := strings.CutSuffix(o.Label, a.over)
			if !ok || len(o.Repeats) < 2 {
				continue
			}
			u, ok := byLabel[fmt.Sprint(base+a.under, workloadOf(o.result))]
			if !ok || len(u.Repeats) != len(o.Repeats) {
				continue
			}
			if !header {
				fmt.Fprintln(w, a.title)
				header = true
			}
			fmt.Fprintf(w, "- %s, %d conns: %s", base+a.under, o.Connections, ratios(o.Repeats, u.Repeats))
			if !slices.Contains(u.RepeatP99s, 0) && len(o.RepeatP99s) == len(u.RepeatP99s) {
				fmt.Fprintf(w, "; p99 %s", ratios(o.RepeatP99s, u.RepeatP99s))
			}
			fmt.Fprintln(w)
		}
		if header {
			fmt.Fprintln(w)
		}
	}
}

// ratios formats over[i]/under[i] for every i, then their median.
func ratios[T int64 | float64](over, under []T) string {
	rs := make([]float64, len(over))
	parts := make([]string, len(over))
	for i := range over {
		if under[i] > 0 {
			rs[i] = float64(over[i]) / float64(under[i])
		}
		parts[i] = fmtRatio(&rs[i])
	}
	slices.Sort(rs)
	return strings.Join(parts, " ") + "; median " + fmtRatio(ptr(median(rs)))
}

// median of sorted values: the middle one, or the mean of the two middle
// ones.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// runReport reads the -json results of several runs (concatenated, as
// "loadgen -json >>FILE" leaves them) and prints one markdown table, a row
// per run, grouped by workload; with -out it also writes them as one JSON
// document.
func runReport(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("loadgen report", flag.ContinueOnError)
	ceiling := fs.String("ceiling", "ceiling", "label of the runs the others are compared with")
	out := fs.String("out", "", "write the runs, with their ratios, as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: loadgen report [-ceiling LABEL] [-out FILE] RESULTS")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	var runs []reportedRun
	dec := json.NewDecoder(f)
	for {
		var r result
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("%s: %w", fs.Arg(0), err)
		}
		runs = append(runs, reportedRun{result: r})
	}
	runs = medians(runs)
	base := map[workload]result{}
	for _, r := range runs {
		if r.Label == *ceiling {
			base[workloadOf(r.result)] = r.result
		}
	}
	for i, r := range runs {
		b := base[workloadOf(r.result)]
		if b.PerSecond > 0 {
			runs[i].CeilingRatio = ptr(r.PerSecond / b.PerSecond)
		}
		if b.P99Micros > 0 {
			runs[i].CeilingP99Ratio = ptr(float64(r.P99Micros) / float64(b.P99Micros))
		}
	}
	// Single decisions before batches, many keys before one, more
	// connections first; the order of targets stays as run.
	slices.SortStableFunc(runs, func(a, b reportedRun) int {
		return cmp.Or(cmp.Compare(a.Batch, b.Batch), -cmp.Compare(a.Keys, b.Keys), -cmp.Compare(a.Connections, b.Connections))
	})
	writeTable(stdout, runs)
	writeAlternated(stdout, runs)
	var labels []string
	var ledgers []*ledger
	for _, r := range runs {
		if r.Ledger != nil {
			labels = append(labels, fmt.Sprintf("%s (%d conns)", cmp.Or(r.Label, r.Mode), r.Connections))
			ledgers = append(ledgers, r.Ledger)
		}
	}
	if len(ledgers) > 0 {
		writeLedgers(stdout, labels, ledgers)
	}
	if *out == "" {
		return nil
	}
	data, err := json.MarshalIndent(report{GeneratedAt: time.Now().UTC(), CPUs: runtime.NumCPU(), Ceiling: *ceiling, Runs: runs}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(*out, append(data, '\n'), 0o644)
}

func writeTable(w io.Writer, runs []reportedRun) {
	fmt.Fprintln(w, "| target | conns | keys | batch | decisions/s | × ceiling | p50 | p99 | p99 × ceiling's | CPU µs/decision | decisions/entry | fsyncs/s | decisions/fsync | failed calls |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		keys := thousands(int64(r.Keys)) + " uniform"
		if r.Keys == 1 {
			keys = "1 hot"
		}
		label := cmp.Or(r.Label, r.Mode)
		if len(r.Repeats) > 1 {
			label += fmt.Sprintf(" (median of %d)", len(r.Repeats))
		}
		var syncsPerSecond *float64
		if r.LogSyncs != nil && r.Seconds > 0 {
			syncsPerSecond = ptr(*r.LogSyncs / r.Seconds)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			label, r.Connections, keys, r.Batch, thousands(int64(r.PerSecond+0.5)), fmtRatio(r.CeilingRatio),
			millis(r.P50Micros), millis(r.P99Micros), fmtRatio(r.CeilingP99Ratio),
			fmtOpt(r.CPUMicrosPerDecision, 1), fmtOpt(r.DecisionsPerEntry, 1), fmtOpt(syncsPerSecond, 0), fmtOpt(r.DecisionsPerSync, 1),
			thousands(r.Errors))
	}
	for _, r := range runs {
		if r.FirstErrText != "" {
			fmt.Fprintf(w, "\n%s, %d conns, %d keys: first error: %s", cmp.Or(r.Label, r.Mode), r.Connections, r.Keys, r.FirstErrText)
		}
	}
	fmt.Fprintln(w)
}

func millis(us int64) string {
	return strconv.FormatFloat(float64(us)/1000, 'f', 2, 64) + " ms"
}

func fmtRatio(v *float64) string {
	if v == nil {
		return "-"
	}
	return "×" + strconv.FormatFloat(*v, 'f', 2, 64)
}

// thousands formats n with commas: 12345 → "12,345".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
