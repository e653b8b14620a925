package runner

import (
	"slices"

	"github.com/quorate/quorate/jepsen/history"
)

// Latency summarizes operation latencies.
type Latency struct {
	Ops     int     `json:"ops"`
	P50     float64 `json:"p50"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
	Retried float64 `json:"retried_fraction"`
}

// latencies splits the operations answered ok into those that overlapped
// a fault interval and the rest. An operation's latency runs from its first
// attempt to its first ok answer (probes sent after the run left out); it
// was retried if that answer was not its first attempt's.
func latencies(h history.History) (fault, quiet Latency) {
	type span struct{ from, to int64 }
	var spans []span
	open := map[string]int64{}
	for _, e := range h.Events {
		if e.Phase == history.PhaseStart {
			open[e.Name] = e.Time
		} else if t, ok := open[e.Name]; ok {
			spans = append(spans, span{t, e.Time})
			delete(open, e.Name)
		}
	}
	var fl, ql []float64
	var fr, qr int
	for _, o := range h.Operations() {
		invoke, answered, retried := int64(0), int64(0), false
		for _, i := range o.Attempts {
			op := h.Ops[i]
			if op.Probe == "resolve" {
				continue
			}
			if invoke == 0 || op.Invoke < invoke {
				invoke = op.Invoke
			}
			if op.Outcome == history.OutcomeOK && answered == 0 {
				answered, retried = op.Complete, op.Attempt > 0
			}
		}
		if answered == 0 {
			continue
		}
		d := float64(answered-invoke) / 1e6
		during := false
		for _, sp := range spans {
			if invoke <= sp.to && answered >= sp.from {
				during = true
				break
			}
		}
		if during {
			fl = append(fl, d)
			if retried {
				fr++
			}
		} else {
			ql = append(ql, d)
			if retried {
				qr++
			}
		}
	}
	return summarize(fl, fr), summarize(ql, qr)
}

func summarize(ds []float64, retried int) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return Latency{Ops: len(ds), P50: at(0.5), P99: at(0.99), Max: ds[len(ds)-1], Retried: float64(retried) / float64(len(ds))}
}
