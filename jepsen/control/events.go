//go:build linux

package control

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Phases of an Event.
const (
	PhaseStart = "start"
	PhaseStop  = "stop"
)

// Event is one fault starting or stopping, stamped with the harness's real
// (unskewed) clock.
type Event struct {
	// Time is when the fault took effect (start) or was undone (stop), in
	// Unix nanoseconds.
	Time int64 `json:"time"`
	// Name is the nemesis that started the fault ("kill", "partition-halves", ...).
	Name string `json:"name"`
	// Phase is PhaseStart or PhaseStop.
	Phase string `json:"phase"`
	// Detail says what was done: "nodes" ("n1,n3"), "cut" (partitions),
	// "offset_ns" (clocks), "error" (a step that failed), ...
	Detail map[string]string `json:"detail,omitempty"`
}

// recorder is an append-only list of events; the zero value (with now set)
// is ready to use and safe for concurrent use.
type recorder struct {
	now    func() time.Time
	mu     sync.Mutex
	events []Event
}

func (r *recorder) record(name, phase string, detail map[string]string) Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := Event{Time: r.now().UnixNano(), Name: name, Phase: phase, Detail: detail}
	r.events = append(r.events, e)
	return e
}

func (r *recorder) list() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.events)
	for i := range out {
		out[i].Detail = maps.Clone(out[i].Detail)
	}
	return out
}

// Events returns a copy of every event recorded so far, in the order they
// were recorded (which is also time order).
func (c *Cluster) Events() []Event { return c.recorder.list() }
