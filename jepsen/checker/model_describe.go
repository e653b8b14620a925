package checker

import (
	"fmt"

	"github.com/quorate/quorate/bucket"
)

func (s bstate) String() string {
	var b string
	if s.isNew() {
		b = "new"
		if s.fresh {
			b = "filled"
		}
	} else if s.lo == s.hi {
		b = s.lo.String()
	} else {
		b = fmt.Sprintf("[%s, %s]", s.lo, s.hi)
	}
	if s.pend != "" {
		var n int64
		for _, p := range decodePending(s.pend) {
			n += int64(p.n) * p.cost
		}
		b += fmt.Sprintf(" with up to %d tokens of info ops pending", n)
	}
	b += fmt.Sprintf(" (cap %d, rate %s/s)", s.pol.Capacity, bucket.FormatRate(s.pol.Rate))
	if len(s.pols) > 16 {
		b += fmt.Sprintf(" in tier #%d", s.tier)
	}
	return b
}

func (in step) String() string {
	switch in.kind {
	case stepPolicy:
		s := fmt.Sprintf("policy cap %d rate %s/s", in.pol.Capacity, bucket.FormatRate(in.pol.Rate))
		if in.fill {
			s += " on_raise fill"
		}
		if in.maybe {
			s += " (not acked)"
		}
		return s
	case stepAssign:
		s := fmt.Sprintf("move to tier #%d", in.tier)
		if in.maybe {
			s += " (not acked)"
		}
		return s
	case stepRead:
		return fmt.Sprintf("read -> %d (limit %d) @%d", in.remaining, in.limit, in.stamp)
	}
	if in.info {
		return fmt.Sprintf("allow %d -> ?", in.cost)
	}
	v := "denied"
	if in.allowed {
		v = "allowed"
	}
	return fmt.Sprintf("allow %d -> %s, %d left (limit %d) @%d", in.cost, v, in.remaining, in.limit, in.stamp)
}
