package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type summary struct {
	Runs                   int     `json:"runs"`
	Succeeded              int     `json:"succeeded"`
	MedianKillToDecisionMs float64 `json:"median_kill_to_first_decision_ms"`
	MaxKillToDecisionMs    float64 `json:"max_kill_to_first_decision_ms"`
	MedianUnavailableMs    float64 `json:"median_unavailable_ms"`
	MaxUnavailableMs       float64 `json:"max_unavailable_ms"`
}

func summarize(rs []runResult) summary {
	s := summary{Runs: len(rs)}
	var dec, unav []float64
	for _, r := range rs {
		if r.Error == "" {
			s.Succeeded++
			dec = append(dec, r.KillToDecisionMs)
			unav = append(unav, r.UnavailableMs)
		}
	}
	s.MedianKillToDecisionMs, s.MaxKillToDecisionMs = medianMax(dec)
	s.MedianUnavailableMs, s.MaxUnavailableMs = medianMax(unav)
	return s
}

func medianMax(xs []float64) (median, maximum float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		median = s[n/2]
	} else {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return median, s[n-1]
}

func report(w io.Writer, c config, rs []runResult) error {
	s := summarize(rs)
	if c.jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Client     string      `json:"client"`
			IntervalMs float64     `json:"probe_interval_ms"`
			Results    []runResult `json:"results"`
			Summary    summary     `json:"summary"`
		}{c.client, ms(c.interval), rs, s})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tgroup\tkilled\tvia\tnew leader\tterm\tkill→decision ms\tunavailable ms\tprobes\tfailed\t")
	for _, r := range rs {
		if r.Error != "" {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t-\t-\t-\t-\t%d\t%d\t\n", r.Run, r.Group, r.Killed, r.Via, r.Probes, r.FailedProbes)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d→%d\t%.1f\t%.1f\t%d\t%d\t\n", r.Run, r.Group, r.Killed, r.Via, r.NewLeader, r.OldTerm, r.NewTerm, r.KillToDecisionMs, r.UnavailableMs, r.Probes, r.FailedProbes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.Error != "" {
			fmt.Fprintf(w, "run %d failed: %s\n", r.Run, r.Error)
		}
		if len(r.Failures) == 0 {
			continue
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.Failures)) {
			f := r.Failures[k]
			parts = append(parts, fmt.Sprintf("%s ×%d (%.0f–%.0f ms)", k, f.Count, f.MinMs, f.MaxMs))
		}
		fmt.Fprintf(w, "run %d failed probes sent after the kill: %s; last sent %.0f ms after it\n", r.Run, strings.Join(parts, ", "), r.LastFailedSentMs)
	}
	fmt.Fprintf(w, "client %q, probe every %s; %d of %d runs measured\n", c.client, c.interval, s.Succeeded, s.Runs)
	if s.Succeeded > 0 {
		fmt.Fprintf(w, "kill → first decision by the new leader: median %.1f ms, max %.1f ms\n", s.MedianKillToDecisionMs, s.MaxKillToDecisionMs)
		fmt.Fprintf(w, "unavailable (last old-leader answer → first new-leader answer): median %.1f ms, max %.1f ms\n", s.MedianUnavailableMs, s.MaxUnavailableMs)
	}
	return nil
}
