package runner

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/checker"
	"github.com/quorate/quorate/jepsen/history"
)

// writePlots draws, for the busiest hot keys, the cost admitted since the
// start of the run against the bound C + r·(t + ε) over time, with fault
// intervals shaded, as SVG files (no plotting dependency needed).
func writePlots(dir string, h history.History, p checker.Params, hotKeys int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	byKey := h.OpsByKey()
	keys := h.Keys()
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(len(byKey[b]), len(byKey[a])) })
	start, end := h.Span()
	if end <= start {
		return nil
	}
	skew := int64(p.Skew)
	if skew == 0 {
		for _, o := range h.ClockOffsets {
			skew = max(skew, 2*abs(o))
		}
	}
	drawn := 0
	for _, key := range keys {
		if drawn == min(hotKeys, 4) {
			break
		}
		tier := p.KeyTiers[key]
		pol, ok := p.Tiers[tier]
		if !ok || !strings.HasPrefix(key, "hot-") {
			continue
		}
		for _, pc := range h.Policies { // the largest policy ever in force bounds the whole run
			if pc.Tier == tier {
				if r, err := bucket.ParseRate(pc.RatePerSec); err == nil {
					pol.Capacity = max(pol.Capacity, pc.Capacity)
					pol.Rate = max(pol.Rate, r)
				}
			}
		}
		var pts [][2]float64 // (seconds since start, admitted cost)
		admitted := 0.0
		ops := admissions(h, key)
		slices.SortFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Complete, b.Complete) })
		for _, op := range ops {
			admitted += float64(op.Cost)
			pts = append(pts, [2]float64{float64(op.Complete-start) / 1e9, admitted})
		}
		total := float64(end-start) / 1e9
		bound := func(t float64) float64 {
			return float64(pol.Capacity) + float64(pol.Rate)/bucket.Scale*(t+float64(skew)/1e9)
		}
		svg := drawSVG(key, total, pts, bound, faultSpans(h, start), pol)
		if err := os.WriteFile(filepath.Join(dir, "admitted-"+key+".svg"), []byte(svg), 0o644); err != nil {
			return err
		}
		drawn++
	}
	return nil
}

func abs(ns int64) int64 {
	if ns < 0 {
		return -ns
	}
	return ns
}

// faultSpans pairs nemesis start and stop events into intervals (seconds
// since start).
func faultSpans(h history.History, start int64) [][2]float64 {
	var spans [][2]float64
	open := map[string]int64{}
	for _, e := range h.Events {
		switch e.Phase {
		case history.PhaseStart:
			open[e.Name] = e.Time
		case history.PhaseStop:
			if t, ok := open[e.Name]; ok {
				spans = append(spans, [2]float64{float64(t-start) / 1e9, float64(e.Time-start) / 1e9})
				delete(open, e.Name)
			}
		}
	}
	return spans
}

func drawSVG(key string, total float64, pts [][2]float64, bound func(float64) float64, spans [][2]float64, pol bucket.Policy) string {
	const w, hgt, left, bottom, top, right = 900.0, 420.0, 60.0, 40.0, 30.0, 20.0
	ymax := bound(total) * 1.05
	x := func(t float64) float64 { return left + (w-left-right)*t/total }
	y := func(v float64) float64 { return hgt - bottom - (hgt-bottom-top)*v/ymax }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, hgt)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for _, s := range spans {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f4c7c3" opacity="0.6"/>`+"\n", x(s[0]), top, max(x(s[1])-x(s[0]), 1), hgt-bottom-top)
	}
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, hgt-bottom, w-right, hgt-bottom)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top, left, hgt-bottom)
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#d62728" stroke-dasharray="6,4" points="%.1f,%.1f %.1f,%.1f"/>`+"\n", x(0), y(bound(0)), x(total), y(bound(total)))
	var line strings.Builder
	fmt.Fprintf(&line, "%.1f,%.1f ", x(0), y(0))
	for _, p := range pts {
		fmt.Fprintf(&line, "%.1f,%.1f ", x(p[0]), y(p[1]))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"/>`+"\n", line.String())
	fmt.Fprintf(&b, `<text x="%.0f" y="18">%s: admitted cost (blue; info ops counted as admitted) vs bound C + r·(t + ε) (red, C=%d, r=%s/s); faults shaded</text>`+"\n", left, key, pol.Capacity, bucket.FormatRate(pol.Rate))
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">0 s</text><text x="%.0f" y="%.0f" text-anchor="end">%.0f s</text>`+"\n", left, hgt-bottom+16, w-right, hgt-bottom+16, total)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%.0f</text><text x="%.0f" y="%.0f" text-anchor="end">0</text>`+"\n", left-4, top+4, ymax, left-4, hgt-bottom)
	b.WriteString("</svg>\n")
	return b.String()
}

// admissions returns, per operation on key, the attempt that shows it
// admitted: its first ok answer if allowed (a duplicate answer included: it
// repeats the operation's decision), or, if no attempt was answered ok, its
// last attempt when some outcome is unknown (counted as admitted).
func admissions(h history.History, key string) []history.Op {
	var out []history.Op
	for _, o := range h.Operations() {
		if o.Key != key {
			continue
		}
		switch h.Settled(o) {
		case history.OutcomeOK:
			for _, i := range o.Attempts {
				if op := h.Ops[i]; op.Outcome == history.OutcomeOK {
					if op.Allowed {
						out = append(out, op)
					}
					break
				}
			}
		case history.OutcomeInfo:
			out = append(out, h.Ops[o.Attempts[len(o.Attempts)-1]])
		}
	}
	return out
}
