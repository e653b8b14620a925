package bucket

import (
	"testing"
	"time"
)

// BenchmarkDecide measures one decision on a bucket that refills between
// decisions (the common case: refill, compare, subtract).
func BenchmarkDecide(b *testing.B) {
	p := Policy{Capacity: 100, Rate: 50 * Scale}
	s := New(p, t0)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += int64(7 * time.Millisecond)
		s, _ = Decide(p, s, now, 1)
	}
}

// BenchmarkDecideDenied measures a denial, which also computes the wait.
func BenchmarkDecideDenied(b *testing.B) {
	p := Policy{Capacity: 1, Rate: Scale / 3}
	s := New(p, t0)
	s, _ = Decide(p, s, t0, 1)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Decide(p, s, t0+1, 1)
	}
}
