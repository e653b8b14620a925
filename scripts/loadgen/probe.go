package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/quorate/quorate/client"
)

// Counters read from quorate's /metrics, summed over label sets and nodes.
const (
	metricEntryDecisionsSum   = "quorate_raft_entry_decisions_sum"   // decisions in committed entries
	metricEntryDecisionsCount = "quorate_raft_entry_decisions_count" // committed allow entries
	metricLogSyncs            = "quorate_log_syncs_total"            // fsyncs of the raft log store
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports (the kernel fixes it for /proc
// whatever its internal HZ).
const clockTicks = 100

// snapshot is the servers' counters at one moment.
type snapshot struct {
	cpu      bool               // whether PIDs were measured
	cpuTicks int64              // utime+stime summed over the PIDs
	metrics  map[string]float64 // the counters above that some node exposes
}

// serverStats are what the servers did during a run; a nil field was not
// measured (no PIDs, no /metrics, or a server without that counter).
type serverStats struct {
	CPUSeconds           *float64 `json:"server_cpu_seconds,omitempty"`
	CPUMicrosPerDecision *float64 `json:"cpu_us_per_decision,omitempty"`
	EntryDecisions       *float64 `json:"raft_entry_decisions,omitempty"`
	Entries              *float64 `json:"raft_entries,omitempty"`
	DecisionsPerEntry    *float64 `json:"decisions_per_entry,omitempty"`
	LogSyncs             *float64 `json:"log_syncs,omitempty"`
	DecisionsPerSync     *float64 `json:"decisions_per_sync,omitempty"`
}

// probe reads the CPU time of pids and the counters of every base URL.
func probe(pids []int, urls []string, token string) (snapshot, error) {
	s := snapshot{cpu: len(pids) > 0, metrics: map[string]float64{}}
	for _, pid := range pids {
		t, err := cpuTicks(pid)
		if err != nil {
			return s, err
		}
		s.cpuTicks += t
	}
	for _, u := range urls {
		if err := scrape(u, token, s.metrics); err != nil {
			return s, err
		}
	}
	return s, nil
}

// cpuTicks returns utime+stime of pid, every thread included.
func cpuTicks(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("server process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	if f[0] == "Z" {
		return 0, fmt.Errorf("server process %d has exited", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime or stime", pid)
	}
	return utime + stime, nil
}

// scrape adds base's counters of interest into into; token, if not "",
// is sent as a bearer token.
func scrape(base, token string, into map[string]float64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: client.BearerTransport(http.DefaultTransport, token)}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s/metrics: status %d", base, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if j := strings.IndexByte(name, '{'); j >= 0 {
			// Label values may hold spaces: the value follows the closing brace.
			name = line[:j]
			k := strings.LastIndexByte(line, '}')
			if k < 0 {
				continue
			}
			rest = line[k+1:]
		}
		switch name {
		case metricEntryDecisionsSum, metricEntryDecisionsCount, metricLogSyncs:
		default:
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return fmt.Errorf("%s/metrics: %s: %w", base, name, err)
		}
		into[name] += v
	}
	return sc.Err()
}

// delta turns two snapshots and the decisions answered between them into
// the run's server figures.
func delta(before, after snapshot, decisions int64) serverStats {
	var st serverStats
	d := float64(decisions)
	ratio := func(num float64, den *float64) *float64 {
		if den == nil || *den <= 0 {
			return nil
		}
		return ptr(num / *den)
	}
	diff := func(name string) *float64 {
		a, okA := after.metrics[name]
		b, okB := before.metrics[name]
		if !okA || !okB {
			return nil
		}
		return ptr(a - b)
	}
	if before.cpu && after.cpu {
		st.CPUSeconds = ptr(float64(after.cpuTicks-before.cpuTicks) / clockTicks)
		if decisions > 0 {
			st.CPUMicrosPerDecision = ptr(*st.CPUSeconds * 1e6 / d)
		}
	}
	st.EntryDecisions = diff(metricEntryDecisionsSum)
	st.Entries = diff(metricEntryDecisionsCount)
	if st.EntryDecisions != nil {
		st.DecisionsPerEntry = ratio(*st.EntryDecisions, st.Entries)
	}
	st.LogSyncs = diff(metricLogSyncs)
	st.DecisionsPerSync = ratio(d, st.LogSyncs)
	return st
}

func ptr[T any](v T) *T { return &v }

// fmtOpt formats an optional figure with prec decimals, "-" if absent.
func fmtOpt(v *float64, prec int) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', prec, 64)
}
