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

// BenchmarkDecideWindow measures one decision on a sliding window in its
// steady state: a limit of 100 per second asked every 10 ms, so each
// decision expires about one admission and logs one.
func BenchmarkDecideWindow(b *testing.B) {
	p := Policy{Algorithm: SlidingWindow, Capacity: 100, Window: Second}
	var w Window
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += int64(10 * time.Millisecond)
		w, _ = DecideWindow(p, w, now, 1)
	}
}

// BenchmarkDecideWindowDenied measures a denial of a full window of 1,000
// admissions, which walks the log for the wait.
func BenchmarkDecideWindowDenied(b *testing.B) {
	p := Policy{Algorithm: SlidingWindow, Capacity: 1000, Window: 60 * Second}
	var w Window
	for i := range 1000 {
		w, _ = DecideWindow(p, w, t0+int64(i)*int64(time.Millisecond), 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = DecideWindow(p, w, t0+int64(time.Second), 1000)
	}
}
