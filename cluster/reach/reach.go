// Package reach records when a node last heard from each of its peers,
// and whether it has been running long enough, without a gap, for silence
// to mean anything. The node reports every answer it gets (any group's raft
// request, through raftgroup.Config.OnContact, or a forwarded decision);
// with raft's own view of when each followed leader was last heard from,
// that is its evidence of which peers it can reach, which Judge (judge.go)
// weighs against each group's voters.
package reach

import (
	"sync"
	"sync/atomic"
	"time"
)

// Tracker records when each peer last answered this node (Contact). Silence
// is evidence only while this node was running to hear: a Tracker also
// ticks (Tick, every quarter of the window), and a node that started, or
// resumed from a pause or a stall longer than half the window, less than a
// window ago has not listened long enough to judge (Awake).
type Tracker struct {
	now    func() time.Time
	window time.Duration
	mu     sync.RWMutex
	heard  map[string]*atomic.Int64 // raft address → unix nanos of the last answer

	lastTick   atomic.Int64 // unix nanos
	awakeSince atomic.Int64 // unix nanos of the start, or of the tick that ended the last gap
}

// New returns a Tracker that reads the time with now and judges over
// window; it counts as started now.
func New(now func() time.Time, window time.Duration) *Tracker {
	r := &Tracker{now: now, window: window, heard: map[string]*atomic.Int64{}}
	t := now().UnixNano()
	r.lastTick.Store(t)
	r.awakeSince.Store(t)
	return r
}

// Tick records that the node runs; call it every quarter of the window.
func (r *Tracker) Tick() {
	t := r.now().UnixNano()
	if last := r.lastTick.Swap(t); time.Duration(t-last) > r.window/2 {
		r.awakeSince.Store(t) // a pause or a stall: what was not heard then proves nothing
	}
}

// Awake reports whether the node has been running, without a gap, for the
// whole window up to now.
func (r *Tracker) Awake() bool {
	t := r.now().UnixNano()
	return time.Duration(t-r.lastTick.Load()) <= r.window/2 && time.Duration(t-r.awakeSince.Load()) >= r.window
}

// Contact records that addr answered just now.
func (r *Tracker) Contact(addr string) {
	r.mu.RLock()
	t := r.heard[addr]
	r.mu.RUnlock()
	if t == nil {
		r.mu.Lock()
		if t = r.heard[addr]; t == nil {
			t = new(atomic.Int64)
			r.heard[addr] = t
		}
		r.mu.Unlock()
	}
	t.Store(r.now().UnixNano())
}

// Last returns when addr last answered (the zero time if never).
func (r *Tracker) Last(addr string) time.Time {
	r.mu.RLock()
	t := r.heard[addr]
	r.mu.RUnlock()
	if t == nil {
		return time.Time{}
	}
	return time.Unix(0, t.Load())
}

// Now returns the time as the Tracker reads it.
func (r *Tracker) Now() time.Time { return r.now() }

// Window returns the span the Tracker judges over.
func (r *Tracker) Window() time.Duration { return r.window }
