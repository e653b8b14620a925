// Package rtmetrics serves the Go runtime's own counters (runtime/metrics)
// as one JSON object on a node's debug listener, and reads them back, so
// that a benchmark can say what a decision costs in allocations, goroutine
// wake-ups and GC time, measured inside the node rather than guessed from
// outside.
//
// Every scalar metric is served under its runtime/metrics name. A
// histogram is served as the number of events it has counted, under its
// name with CountSuffix: "/sched/latencies:seconds#count" is how many
// goroutine schedulings the runtime sampled (it samples one in
// SchedSampling).
package rtmetrics

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"runtime/metrics"
	"strings"
	"time"
)

// Path is where a node's debug listener serves the counters.
const Path = "/debug/runtime-metrics"

// CountSuffix follows a histogram's name: its value is the histogram's
// total count.
const CountSuffix = "#count"

// SchedSampling is how many schedulings of a goroutine the runtime counts
// per event in /sched/latencies:seconds (it tracks every 8th, see
// gTrackingPeriod in runtime/proc.go); the histogram's count times this is
// an estimate of how often goroutines were made to run.
const SchedSampling = 8

// Names of the counters a cost ledger reads.
const (
	AllocObjects     = "/gc/heap/allocs:objects"
	AllocBytes       = "/gc/heap/allocs:bytes"
	GCCPU            = "/cpu/classes/gc/total:cpu-seconds"
	UserCPU          = "/cpu/classes/user:cpu-seconds"
	GoroutinesMade   = "/sched/goroutines-created:goroutines"
	SchedLatencies   = "/sched/latencies:seconds" + CountSuffix
	MutexWaitSeconds = "/sync/mutex/wait/total:seconds"
)

// Handler serves every runtime metric as a JSON object of name to number.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Read())
	})
}

// Read returns this process's runtime metrics now.
func Read() map[string]float64 {
	descs := metrics.All()
	samples := make([]metrics.Sample, len(descs))
	for i, d := range descs {
		samples[i].Name = d.Name
	}
	metrics.Read(samples)
	out := make(map[string]float64, len(samples))
	for _, s := range samples {
		switch s.Value.Kind() {
		case metrics.KindUint64:
			out[s.Name] = float64(s.Value.Uint64())
		case metrics.KindFloat64:
			if v := s.Value.Float64(); !math.IsNaN(v) && !math.IsInf(v, 0) {
				out[s.Name] = v
			}
		case metrics.KindFloat64Histogram:
			var n uint64
			for _, c := range s.Value.Float64Histogram().Counts {
				n += c
			}
			out[s.Name+CountSuffix] = float64(n)
		}
	}
	return out
}

// Fetch reads the counters of the node whose debug listener is at base
// (http://host:port); token, if not "", is sent as a bearer token (the
// debug listener wants an admin one when the node has tokens).
func Fetch(ctx context.Context, hc *http.Client, base, token string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+Path, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s%s: status %d", base, Path, resp.StatusCode)
	}
	var out map[string]float64
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s%s: %w", base, Path, err)
	}
	return out, nil
}
