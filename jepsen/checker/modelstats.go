package checker

import (
	"sync/atomic"

	"github.com/quorate/quorate/bucket"
)

// gap bounds the policies that may have been in force since a state's
// last decision: their smallest and largest rates and capacities.
type gap struct{ minRate, maxRate, minCap, maxCap int64 }

func gapOf(p bucket.Policy) gap { return gap{p.Rate, p.Rate, p.Capacity, p.Capacity} }

// with returns g widened to include p.
func (g gap) with(p bucket.Policy) gap {
	return gap{min(g.minRate, p.Rate), max(g.maxRate, p.Rate), min(g.minCap, p.Capacity), max(g.maxCap, p.Capacity)}
}

// fallbacks records which of the model's approximations one step used.
type fallbacks struct {
	// across: pending ops may have been settled in a gap with a policy
	// change (or tier move), where their balance is only bounded.
	across bool
	// wide: some possible balance was "anything from 0 to capacity" (the
	// coarsest approximation: it accepts any answer under the capacity).
	wide bool
	// overflow: more pending tokens than maxPendingSum, tracked as wide.
	overflow bool
	// reclaim: the bucket may have been full since a change and forgotten,
	// so a second possibility, full at the current capacity, was kept.
	reclaim bool
	// fill: a policy change with on_raise fill raised the key's tier and
	// refilled it (not a fallback: exact).
	fill bool
}

// ModelStats counts, over every step the linearizability search takes
// (a search steps the same operation many times while it backtracks), the
// decisions and reads stepped and how many of them used each of the
// model's approximations. It is safe for concurrent use.
type ModelStats struct {
	steps, across, wide, overflow, reclaim atomic.Int64
	// fills counts the policy steps that refilled the key (in some state).
	fills atomic.Int64
}

// record counts one step of in; a nil s counts nothing.
func (s *ModelStats) record(in step, fb fallbacks) {
	if s != nil && in.kind == stepPolicy && fb.fill {
		s.fills.Add(1)
	}
	if s == nil || (in.kind != stepRead && (in.kind != stepAllow || in.info)) {
		return
	}
	s.steps.Add(1)
	for _, c := range []struct {
		on bool
		n  *atomic.Int64
	}{{fb.across, &s.across}, {fb.wide, &s.wide}, {fb.overflow, &s.overflow}, {fb.reclaim, &s.reclaim}} {
		if c.on {
			c.n.Add(1)
		}
	}
}

// WideRate is the share of stepped decisions and reads whose possible
// balances included "anything from 0 to capacity".
func (s *ModelStats) WideRate() float64 {
	n := s.steps.Load()
	if n == 0 {
		return 0
	}
	return float64(s.wide.Load()) / float64(n)
}

func (s *ModelStats) report(r *report) {
	r.set("model_steps", s.steps.Load())
	r.set("model_steps_across_a_change", s.across.Load())
	r.set("model_steps_wide", s.wide.Load())
	r.set("model_steps_overflow", s.overflow.Load())
	r.set("model_steps_reclaim", s.reclaim.Load())
	r.set("model_fill_steps", s.fills.Load())
	r.set("model_wide_rate", s.WideRate())
}
