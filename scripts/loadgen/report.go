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
	type workload struct{ conns, keys, batch int }
	key := func(r result) workload { return workload{r.Connections, r.Keys, r.Batch} }
	base := map[workload]result{}
	for _, r := range runs {
		if r.Label == *ceiling {
			base[key(r.result)] = r.result
		}
	}
	for i, r := range runs {
		b := base[key(r.result)]
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
