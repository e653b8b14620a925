// Command jepsen runs quorate's fault-injection suite: real nodes in
// network namespaces, killed, paused, partitioned and skewed while a seeded
// workload runs, then checked for linearizability, stamps, the
// over-admission bound, policy changes and availability.
//
//	go run ./jepsen/cmd/jepsen -mix smoke
//	go run ./jepsen/cmd/jepsen -mix full -seed 7
//	go run ./jepsen/cmd/jepsen -mix smoke -unsafe   # the negative control: must fail
//	go run ./jepsen/cmd/jepsen -soak 4              # 4 seeds of every mix, one table
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/quorate/quorate/jepsen/checker"
	"github.com/quorate/quorate/jepsen/runner"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "jepsen:", err)
		os.Exit(1)
	}
}

// mixes are the named nemesis combinations; full runs all of them. An
// interval, if set, replaces the default -interval (restart stops a group
// leader gracefully about every 2.5 s).
var mixes = map[string]struct {
	nodes    int
	nemeses  []string
	interval time.Duration
}{
	"smoke":      {3, []string{"kill", "partition-leader", "clock-bump"}, 0},
	"crash":      {3, []string{"kill", "kill-leader", "pause"}, 0},
	"partition":  {3, []string{"partition-one", "partition-leader", "partition-halves"}, 0},
	"partition5": {5, []string{"partition-ring", "partition-bridge", "kill-minority", "partition-halves"}, 0},
	"clock":      {3, []string{"clock-bump", "clock-strobe", "clock-restart-ahead", "clock-jump-ahead", "partition-leader"}, 0},
	"membership": {3, []string{"leave-rejoin", "kill"}, 0},
	"restart":    {3, []string{"term-leader"}, 1250 * time.Millisecond},
	// upgrade needs -upgrade-from: every node starts on that release and
	// is rolled to the working tree's binary, one at a time.
	"upgrade": {3, []string{"upgrade-roll"}, 2 * time.Second},
}

var fullOrder = []string{"crash", "partition", "partition5", "clock", "membership", "restart"}

// defaultInterval is -interval's default for mixes without their own.
const defaultInterval = 4 * time.Second

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("jepsen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mix := fs.String("mix", "smoke", "smoke, full, one of crash|partition|partition5|clock|membership|restart|upgrade, or comma-separated nemesis names")
	nodes := fs.Int("nodes", 0, "3 or 5 (default: the mix's)")
	duration := fs.Duration("duration", 0, "faults and load per run (default 45s for smoke, 25s with -soak, 150s otherwise)")
	interval := fs.Duration("interval", 0, "length of each fault and of the quiet gap after it (default: the mix's, else 4s)")
	soak := fs.Int("soak", 0, "run this many seeds of every mix (from -seed on) and print one summary table")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()%1_000_000), "seed of the workload and the nemesis schedule")
	out := fs.String("out", "results", "results folder")
	unsafe := fs.Bool("unsafe", false, "run the negative control (built with unsafe_decide): the checkers must reject it")
	groups := fs.Int("groups", 4, "data groups")
	raftTimeout := fs.Duration("raft-timeout", 300*time.Millisecond, "the nodes' --raft-timeout (the product default)")
	workers := fs.Int("workers", 12, "concurrent client processes")
	noNetns := fs.Bool("no-netns", false, "run nodes on 127.0.0.x with process faults only")
	verbose := fs.Bool("v", false, "log what the harness does")
	prefix := fs.String("prefix", "qj", "prefix of the network namespaces (runs on one machine at once need different ones)")
	recheck := fs.String("recheck", "", "run the checkers again on a results folder and print them (no cluster)")
	nodeArgs := fs.String("node-args", "", "extra serve flags for every node, space-separated (e.g. --max-clock-offset=-1 to see the checkers catch what the clock guard prevents)")
	upgradeFrom := fs.String("upgrade-from", "", "a git revision: start every node on its binary, and with -mix upgrade roll them to this tree's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *recheck != "" {
		s, err := runner.Recheck(*recheck)
		if err != nil {
			return err
		}
		printSummary(stdout, s)
		if !s.Valid {
			return errors.New("a checker found a violation")
		}
		return nil
	}
	repo, err := os.Getwd()
	if err != nil {
		return err
	}

	type plan struct {
		name    string
		nodes   int
		nemeses []string
	}
	var plans []plan
	order := fullOrder
	if *upgradeFrom != "" {
		order = append(slices.Clone(fullOrder), "upgrade")
	}
	switch {
	case *soak > 0:
		for range *soak {
			for _, n := range order {
				plans = append(plans, plan{n, mixes[n].nodes, mixes[n].nemeses})
			}
		}
	case *mix == "full":
		for _, n := range order {
			plans = append(plans, plan{n, mixes[n].nodes, mixes[n].nemeses})
		}
	case mixes[*mix].nodes != 0:
		plans = append(plans, plan{*mix, mixes[*mix].nodes, mixes[*mix].nemeses})
	default:
		plans = append(plans, plan{"custom", 3, strings.Split(*mix, ",")})
	}
	for _, p := range plans {
		if slices.Contains(p.nemeses, "upgrade-roll") && *upgradeFrom == "" {
			return errors.New("upgrade-roll needs -upgrade-from REV: the release every node starts on")
		}
	}
	fmt.Fprintf(stdout, "jepsen: seed %d (replay with -seed %d)\n", *seed, *seed)

	failed := false
	var table soakTable
	defer func() {
		if *soak > 0 {
			table.print(stdout)
		}
	}()
	for i, p := range plans {
		if *nodes != 0 {
			p.nodes = *nodes
		}
		d := *duration
		switch {
		case d != 0:
		case *soak > 0:
			d = 25 * time.Second
		case p.name == "smoke", p.name == "upgrade":
			d = 45 * time.Second
		default:
			d = 150 * time.Second
		}
		if p.name == "upgrade" && *duration == 0 {
			d = max(d, 35*time.Second) // three nodes rolled, each after the last is ready
		}
		iv := cmp.Or(*interval, mixes[p.name].interval, defaultInterval)
		sum, err := runner.Run(ctx, runner.Config{
			Name: p.name, Nodes: p.nodes, Duration: d, Nemeses: p.nemeses, Interval: iv,
			Seed: *seed + uint64(i), Out: *out, Unsafe: *unsafe, Groups: *groups, RaftTimeout: *raftTimeout,
			Workers: *workers, HotKeys: 3, ColdKeys: 200, HotCapacity: 20, HotRate: "10",
			PolicyChanges: true, AccountKeys: 4, UseNetns: !*noNetns, Prefix: *prefix, Logger: logger, Repo: repo,
			UpgradeFrom: upgradeOf(p.nemeses, *upgradeFrom), NodeArgs: strings.Fields(*nodeArgs),
		})
		if err != nil {
			return fmt.Errorf("run %s: %w", p.name, err)
		}
		printSummary(stdout, sum)
		table.add(sum)
		failed = failed || !sum.Valid
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	switch {
	case *unsafe && !failed:
		return errors.New("the negative control passed every checker: the suite cannot see what it exists to catch")
	case *unsafe:
		fmt.Fprintln(stdout, "jepsen: the negative control was rejected, as it must be")
		return nil
	case failed:
		return errors.New("a checker found a violation (see the results folder)")
	}
	return nil
}

// upgradeOf is the release a run starts from: rev for a run that rolls the
// nodes, none otherwise.
func upgradeOf(nemeses []string, rev string) string {
	if slices.Contains(nemeses, "upgrade-roll") {
		return rev
	}
	return ""
}

func printSummary(w io.Writer, s runner.Summary) {
	fmt.Fprintf(w, "\n== %s: %d nodes, nemeses %s, seed %d, netns %v\n", s.Name, s.Nodes, strings.Join(s.Nemeses, ","), s.Seed, s.Netns)
	fmt.Fprintf(w, "   ops %d in %d attempts (ok %d, unknown %d = %.2f%%, never applied %d), faults %d, results in %s\n", s.Ops, s.Attempts, s.OK, s.Info, 100*s.InfoFraction, s.Fail, s.Faults, s.Dir)
	fl, ql := s.FaultLatency, s.QuietLatency
	fmt.Fprintf(w, "   latency during faults: %d ops, p50 %.1f ms, p99 %.1f ms, max %.0f ms, %.2f%% retried; outside: %d ops, p50 %.1f ms, p99 %.1f ms, max %.0f ms\n",
		fl.Ops, fl.P50, fl.P99, fl.Max, 100*fl.Retried, ql.Ops, ql.P50, ql.P99, ql.Max)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   CHECKER\tVALID\tSUMMARY")
	for _, r := range s.Results {
		fmt.Fprintf(tw, "   %s\t%v\t%s\n", r.Name, r.Valid, compact(r.Summary))
	}
	tw.Flush()
	if line := featureLine(s.Results); line != "" {
		fmt.Fprintf(w, "   %s\n", line)
	}
	for _, r := range s.Results {
		if r.Name == "availability" {
			if line := perNemesis(r); line != "" {
				fmt.Fprintf(w, "   answered / attempted during faults: %s\n", line)
			}
			if n := num(r, "calls_during_faults"); n > 0 {
				fmt.Fprintf(w, "   client calls decided (every attempt of one request id): during faults %.2f%% (%.0f/%.0f; within 1 s %.2f%%, 2 s %.2f%%), outside %.2f%% (%.0f/%.0f)\n",
					100*num(r, "call_availability_during_faults"), num(r, "calls_decided_during_faults"), n,
					100*num(r, "calls_decided_within_1s_during_faults")/n, 100*num(r, "calls_decided_within_2s_during_faults")/n,
					100*num(r, "call_availability_outside_faults"), num(r, "calls_decided_outside_faults"), num(r, "calls_outside_faults"))
			}
		}
	}
	for _, r := range s.Results {
		for i, f := range r.Failures {
			if i == 3 {
				fmt.Fprintf(w, "   %s: ... %d more\n", r.Name, len(r.Failures)-3)
				break
			}
			fmt.Fprintf(w, "   %s: %s\n", r.Name, f)
		}
	}
	verdict := "PASS"
	if !s.Valid {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "   verdict: %s\n", verdict)
}

// featureLine renders what the window checker and the model's fills
// checked: a run whose line shows zeros did not exercise them.
func featureLine(results []checker.Result) string {
	var win, lin *checker.Result
	for i := range results {
		switch results[i].Name {
		case "window":
			win = &results[i]
		case "linearizable":
			lin = &results[i]
		}
	}
	var parts []string
	if win != nil {
		parts = append(parts, fmt.Sprintf("windows: %.0f keys, %.0f decisions (%.0f admissions, %.0f denials), %.0f windows checked, worst admitted/limit %.3f, %.0f skipped across a fill",
			num(*win, "keys"), num(*win, "decisions"), num(*win, "admissions"), num(*win, "denials"), num(*win, "windows_checked"),
			num(*win, "worst_window_ratio"), num(*win, "skipped_across_fill")))
	}
	if lin != nil {
		parts = append(parts, fmt.Sprintf("fills: %.0f fill changes checked by the model across its keys (%.0f model steps refilled a key)",
			num(*lin, "fill_ops"), num(*lin, "model_fill_steps")))
	}
	return strings.Join(parts, "; ")
}

// perNemesis renders the availability checker's per-nemesis figures:
// attempts answered with a decision among those invoked during each kind
// of fault, then over all faults.
func perNemesis(r checker.Result) string {
	var parts []string
	for _, k := range sortedKeys(r.Summary) {
		name, ok := strings.CutPrefix(k, "attempts_during_")
		if !ok {
			continue
		}
		part := fmt.Sprintf("%s %.2f%% (%.0f/%.0f", name, 100*num(r, "availability_during_"+name), num(r, "answered_during_"+name), num(r, k))
		if _, ok := r.Summary["to_faulted_during_"+name]; ok && num(r, k) > 0 {
			part += fmt.Sprintf("; %.1f%% sent to the faulted node, %.0f answered", 100*num(r, "to_faulted_during_"+name)/num(r, k), num(r, "answered_to_faulted_during_"+name))
		}
		if _, ok := r.Summary["unanswered_max_ms_during_"+name]; ok {
			part += fmt.Sprintf("; unanswered p50 %.0f ms, max %.0f ms", num(r, "unanswered_p50_ms_during_"+name), num(r, "unanswered_max_ms_during_"+name))
		}
		parts = append(parts, part+")")
	}
	if len(parts) == 0 {
		return ""
	}
	parts = append(parts, fmt.Sprintf("all faults %.2f%% (%.0f/%.0f)", 100*num(r, "availability_during_faults"), num(r, "ok_during_faults"), num(r, "ops_during_faults")))
	return strings.Join(parts, ", ")
}

// perNemesisKey reports whether k is one of the availability checker's
// per-nemesis figures, which perNemesis prints on a line of their own.
func perNemesisKey(k string) bool {
	for _, p := range []string{"attempts_during_", "answered_during_", "availability_during_", "unanswered_p50_ms_during_", "unanswered_max_ms_during_", "to_faulted_during_", "answered_to_faulted_during_"} {
		if rest, ok := strings.CutPrefix(k, p); ok && rest != "faults" {
			return true
		}
	}
	return false
}

func compact(m map[string]any) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		if perNemesisKey(k) {
			continue
		}
		switch v := m[k].(type) {
		case float64:
			parts = append(parts, fmt.Sprintf("%s=%.4g", k, v))
		default:
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	s := strings.Join(parts, " ")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
