package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"

	"github.com/quorate/quorate/internal/rtmetrics"
)

// The cost ledger (-ledger): while the load runs, every node's CPU profile
// over the middle of the run, split into stages (stages.go), and what the
// nodes' runtimes and kernels counted over the same window, all per
// decision answered in it. The CPU of a stage is its share of the
// profiles' samples times the CPU /proc charged the nodes in the window,
// so the stages add up to the measured CPU, not to the sampled one.

// ledger is one run's ledger, summed over the nodes.
type ledger struct {
	Nodes             int          `json:"nodes"`
	Seconds           float64      `json:"seconds"`   // the profiled window
	Decisions         int64        `json:"decisions"` // answered in it
	ProcCPUSeconds    float64      `json:"proc_cpu_seconds"`
	ProfileCPUSeconds float64      `json:"profile_cpu_seconds"`
	CPUMicros         float64      `json:"cpu_us_per_decision"`
	Stages            []stageCost  `json:"stages"`
	PerDecision       ledgerCounts `json:"per_decision"`
	PerEntry          ledgerCounts `json:"per_entry"`
	DecisionsPerEntry *float64     `json:"decisions_per_entry,omitempty"`
	DecisionsPerSync  *float64     `json:"decisions_per_fsync,omitempty"`
	// GCShare is the runtime's own estimate of the CPU its collector took,
	// as a share of the nodes' CPU (runtime/metrics, not the profile).
	GCShare *float64 `json:"gc_share,omitempty"`
}

// stageCost is what one stage cost per decision.
type stageCost struct {
	Stage  string  `json:"stage"`
	Micros float64 `json:"cpu_us_per_decision"`
	Share  float64 `json:"share"`
}

// ledgerCounts are the counters of the window divided by decisions (or
// by raft entries), summed over the nodes.
type ledgerCounts struct {
	Allocs     float64 `json:"allocs"`
	AllocBytes float64 `json:"alloc_bytes"`
	// Wakeups estimates how often goroutines were made to run: the
	// runtime samples one scheduling in rtmetrics.SchedSampling.
	Wakeups    float64 `json:"wakeups"`
	Goroutines float64 `json:"goroutines_created"`
	// Syscalls counts read and write system calls (/proc/PID/io syscr and
	// syscw; futex, epoll and fsync calls are not in it).
	Syscalls    float64 `json:"read_write_syscalls"`
	CtxSwitches float64 `json:"context_switches"`
}

// nodeCounters is one reading of a node's counters.
type nodeCounters struct {
	runtime  map[string]float64
	cpuTicks int64
	syscalls int64
	switches int64
}

// ledgerProbe collects a ledger for the nodes whose debug listeners are at
// urls (one per pid, in the same order).
type ledgerProbe struct {
	urls    []string
	pids    []int
	token   string
	metrics []string // /metrics base URLs, for entries and fsyncs
	hc      *http.Client
}

// run waits warm, reads every node, profiles them all for window, reads
// them again, and returns the ledger; decisions reports how many
// decisions have been answered so far.
func (lp ledgerProbe) run(ctx context.Context, warm, window time.Duration, decisions func() int64) (*ledger, error) {
	if len(lp.urls) != len(lp.pids) {
		return nil, fmt.Errorf("-ledger names %d nodes and -pids %d: give one debug URL per PID, in the same order", len(lp.urls), len(lp.pids))
	}
	select {
	case <-time.After(warm):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	seconds := max(1, int(window/time.Second))
	before, err := lp.read(ctx)
	if err != nil {
		return nil, err
	}
	m0, err := probe(nil, lp.metrics, lp.token)
	if err != nil {
		return nil, err
	}
	d0, t0 := decisions(), time.Now()
	profiles := make([]*profile.Profile, len(lp.urls))
	errs := make([]error, len(lp.urls))
	var wg sync.WaitGroup
	for i, u := range lp.urls {
		wg.Go(func() { profiles[i], errs[i] = lp.profile(ctx, u, seconds) })
	}
	wg.Wait()
	d1, t1 := decisions(), time.Now()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	after, err := lp.read(ctx)
	if err != nil {
		return nil, err
	}
	m1, err := probe(nil, lp.metrics, lp.token)
	if err != nil {
		return nil, err
	}
	byStage := map[string]float64{}
	for _, p := range profiles {
		for st, s := range classify(p) {
			byStage[st] += s
		}
	}
	return buildLedger(before, after, byStage, delta(m0, m1, d1-d0), d1-d0, t1.Sub(t0)), nil
}

// buildLedger turns two readings of every node and the profiles' CPU per
// stage into a ledger.
func buildLedger(before, after []nodeCounters, byStage map[string]float64, srv serverStats, decisions int64, window time.Duration) *ledger {
	l := &ledger{Nodes: len(before), Seconds: window.Seconds(), Decisions: decisions,
		DecisionsPerEntry: srv.DecisionsPerEntry, DecisionsPerSync: srv.DecisionsPerSync}
	var sum nodeCounters
	sum.runtime = map[string]float64{}
	for i := range before {
		sum.cpuTicks += after[i].cpuTicks - before[i].cpuTicks
		sum.syscalls += after[i].syscalls - before[i].syscalls
		sum.switches += after[i].switches - before[i].switches
		for k, v := range after[i].runtime {
			sum.runtime[k] += v - before[i].runtime[k]
		}
	}
	l.ProcCPUSeconds = float64(sum.cpuTicks) / clockTicks
	for _, s := range byStage {
		l.ProfileCPUSeconds += s
	}
	if decisions <= 0 {
		return l
	}
	d := float64(decisions)
	l.CPUMicros = l.ProcCPUSeconds * 1e6 / d
	for _, name := range stageNames() {
		share := 0.0
		if l.ProfileCPUSeconds > 0 {
			share = byStage[name] / l.ProfileCPUSeconds
		}
		l.Stages = append(l.Stages, stageCost{Stage: name, Micros: share * l.CPUMicros, Share: share})
	}
	counts := func(per float64) ledgerCounts {
		return ledgerCounts{
			Allocs:      sum.runtime[rtmetrics.AllocObjects] / per,
			AllocBytes:  sum.runtime[rtmetrics.AllocBytes] / per,
			Wakeups:     sum.runtime[rtmetrics.SchedLatencies] * rtmetrics.SchedSampling / per,
			Goroutines:  sum.runtime[rtmetrics.GoroutinesMade] / per,
			Syscalls:    float64(sum.syscalls) / per,
			CtxSwitches: float64(sum.switches) / per,
		}
	}
	l.PerDecision = counts(d)
	if srv.Entries != nil && *srv.Entries > 0 {
		l.PerEntry = counts(*srv.Entries)
	}
	if l.ProcCPUSeconds > 0 {
		l.GCShare = ptr(sum.runtime[rtmetrics.GCCPU] / l.ProcCPUSeconds)
	}
	return l
}

// read takes one reading of every node.
func (lp ledgerProbe) read(ctx context.Context) ([]nodeCounters, error) {
	out := make([]nodeCounters, len(lp.urls))
	for i, u := range lp.urls {
		rt, err := rtmetrics.Fetch(ctx, lp.hc, u, lp.token)
		if err != nil {
			return nil, err
		}
		c := nodeCounters{runtime: rt}
		if c.cpuTicks, err = cpuTicks(lp.pids[i]); err != nil {
			return nil, err
		}
		if c.syscalls, err = ioSyscalls(lp.pids[i]); err != nil {
			return nil, err
		}
		if c.switches, err = contextSwitches(lp.pids[i]); err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// profile fetches a CPU profile of seconds from the debug listener at base.
func (lp ledgerProbe) profile(ctx context.Context, base string, seconds int) (*profile.Profile, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+10)*time.Second)
	defer cancel()
	u := strings.TrimRight(base, "/") + "/debug/pprof/profile?seconds=" + strconv.Itoa(seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if lp.token != "" {
		req.Header.Set("Authorization", "Bearer "+lp.token)
	}
	resp, err := lp.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d", u, resp.StatusCode)
	}
	p, err := profile.Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return p, nil
}

// ioSyscalls is the read and write system calls pid has made (syscr +
// syscw in /proc/PID/io, every thread's).
func ioSyscalls(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	var n int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "syscr" && k != "syscw") {
			continue
		}
		x, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/io: %s: %w", pid, k, err)
		}
		n += x
	}
	return n, nil
}

// contextSwitches sums the voluntary and involuntary context switches of
// pid's live threads (/proc/PID/task/*/status).
func contextSwitches(pid int) (int64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("process %d: no threads in /proc", pid)
	}
	var n int64
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // the thread has exited
		}
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += x
			}
		}
	}
	return n, nil
}

// ledgerResult is what the ledger's goroutine hands back.
type ledgerResult struct {
	l   *ledger
	err error
}

// writeLedger prints one run's ledger.
func writeLedger(w io.Writer, label string, l *ledger) {
	writeLedgers(w, []string{label}, []*ledger{l})
}

// writeLedgers prints the ledgers of several runs side by side: a row per
// stage, then the counters per decision and per entry.
func writeLedgers(w io.Writer, labels []string, ls []*ledger) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Cost ledger (CPU µs per decision; the profiled middle half of each run, every node summed)\n\n")
	fmt.Fprintf(w, "| stage | %s |\n", strings.Join(labels, " | "))
	fmt.Fprintf(w, "|---|%s\n", strings.Repeat("---|", len(ls)))
	row := func(name string, cell func(*ledger) string) {
		cells := make([]string, len(ls))
		for i, l := range ls {
			cells[i] = cell(l)
		}
		fmt.Fprintf(w, "| %s | %s |\n", name, strings.Join(cells, " | "))
	}
	for i, name := range stageNames() {
		row(name, func(l *ledger) string {
			if i >= len(l.Stages) {
				return "-"
			}
			s := l.Stages[i]
			return fmt.Sprintf("%.1f (%.0f%%)", s.Micros, 100*s.Share)
		})
	}
	row("**total (/proc)**", func(l *ledger) string { return fmt.Sprintf("**%.1f**", l.CPUMicros) })
	row("decisions in the window", func(l *ledger) string {
		return thousands(l.Decisions) + fmt.Sprintf(" in %.1f s, %d node(s)", l.Seconds, l.Nodes)
	})
	row("profile / /proc CPU", func(l *ledger) string { return fmt.Sprintf("%.2f / %.2f s", l.ProfileCPUSeconds, l.ProcCPUSeconds) })
	row("GC share (runtime's estimate)", func(l *ledger) string {
		if l.GCShare == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f%%", 100**l.GCShare)
	})
	row("decisions per entry / per fsync", func(l *ledger) string {
		return fmtOpt(l.DecisionsPerEntry, 1) + " / " + fmtOpt(l.DecisionsPerSync, 1)
	})
	counts := []struct {
		name string
		get  func(ledgerCounts) float64
	}{
		{"allocations", func(c ledgerCounts) float64 { return c.Allocs }},
		{"allocated bytes", func(c ledgerCounts) float64 { return c.AllocBytes }},
		{"goroutine wake-ups (est.)", func(c ledgerCounts) float64 { return c.Wakeups }},
		{"goroutines created", func(c ledgerCounts) float64 { return c.Goroutines }},
		{"read/write syscalls", func(c ledgerCounts) float64 { return c.Syscalls }},
		{"context switches", func(c ledgerCounts) float64 { return c.CtxSwitches }},
	}
	for _, c := range counts {
		row(c.name+" per decision / per entry", func(l *ledger) string {
			per := "-"
			if l.PerEntry != (ledgerCounts{}) {
				per = strconv.FormatFloat(c.get(l.PerEntry), 'f', 1, 64)
			}
			return strconv.FormatFloat(c.get(l.PerDecision), 'f', 1, 64) + " / " + per
		})
	}
}
