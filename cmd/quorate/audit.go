package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorate/quorate/api"
)

// printAudit writes GET /v1/audit for people: one change a line, then what
// to ask next, and whether the trail forgot changes after since.
func printAudit(w io.Writer, r api.AuditResponse, since uint64) {
	if since > 0 && r.OldestVersion > since+1 {
		// Version 1 (the starting configuration) and changes made below
		// cluster version 2 are never in the trail either: say only what
		// the caller asked about.
		fmt.Fprintf(w, "versions %d to %d are not in the trail: it keeps the last 10,000 changes, from cluster version 2 on\n", since+1, r.OldestVersion-1)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tTIME (UTC)\tACTOR\tOP\tTIER\tBEFORE\tAFTER\tON RAISE")
	for _, e := range r.Entries {
		onRaise := e.OnRaise
		if onRaise == "" {
			onRaise = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Version, time.Unix(0, e.TimeUnixNano).UTC().Format(time.RFC3339), e.Actor, e.Op, e.Tier,
			policyText(e.Before), policyText(e.After), onRaise)
	}
	tw.Flush()
	switch {
	case len(r.Entries) == 0:
		fmt.Fprintf(w, "no changes after version %d\n", since)
	case r.More:
		fmt.Fprintf(w, "more: quorate audit --since %d\n", r.Entries[len(r.Entries)-1].Version)
	}
}

// policyText is a policy on one line: "10 +0.5/s" for a token bucket of
// capacity 10 refilling half a token a second, "60 per 60s" for a sliding
// window, with its mode and when_unavailable when they are not the
// defaults; "-" for none.
func policyText(p *api.Policy) string {
	if p == nil {
		return "-"
	}
	parts := []string{fmt.Sprintf("%d +%s/s", p.Capacity, p.RefillPerSecond)}
	if p.Algorithm == "sliding_window" {
		parts = []string{fmt.Sprintf("%d per %ds", p.Limit, p.WindowSeconds)}
	}
	if p.Mode != "" && p.Mode != "enforce" {
		parts = append(parts, p.Mode)
	}
	if p.WhenUnavailable != "" && p.WhenUnavailable != "deny" {
		parts = append(parts, "when_unavailable="+p.WhenUnavailable)
	}
	return strings.Join(parts, " ")
}
