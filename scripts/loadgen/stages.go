package main

import (
	"strings"

	"github.com/google/pprof/profile"
)

// A stage is one step in the life of a decision (or work beside it) that
// the cost ledger charges CPU to. A CPU profile sample belongs to the first
// stage, in stages' order, one of whose patterns appears in the name of any
// function on the sample's stack. The order is what makes the split
// meaningful: a sample deep in the HTTP handler that is fsyncing is the
// fsync's, one that is waking another goroutine is the scheduler's, one
// inside the FSM that looks up a request id is the id memory's.
type stage struct {
	name     string
	patterns []string
	// within, if set, must also appear on the stack (a stage that is a
	// part of another: TLS on the raft port, not on the HTTP port).
	within []string
}

// Package paths, as they appear in function names.
const (
	modPath   = "github.com/quorate/quorate/"
	raftPath  = "github.com/hashicorp/raft."
	raftnetFn = modPath + "transport/raftnet."
	raftmuxFn = modPath + "transport/raftmux."
	peerrpcFn = modPath + "cluster/peerrpc."
	forwardFn = modPath + "cluster/forward."
)

// raftPort is what is on the stack of work for the raft port.
var raftPort = []string{raftnetFn, raftmuxFn, peerrpcFn, forwardFn}

// stages, in the order samples are matched against them. "other" takes
// what none of them does.
var stages = []stage{
	{name: "fsync (log sync)", patterns: []string{"syscall.Fdatasync", "syscall.Fsync", "golang.org/x/sys/unix.Fdatasync", "golang.org/x/sys/unix.Fsync", "internal/poll.(*FD).Fsync"}},
	{name: "GC (background and assists)", patterns: []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcMarkDone", "runtime.gcStart", "runtime.markroot", "runtime.sweepone", "runtime.(*mheap).reclaim"}},
	{name: "scheduler (wake-ups, hand-offs, idle)", patterns: []string{"runtime.schedule", "runtime.findRunnable", "runtime.wakep", "runtime.goready", "runtime.park_m", "runtime.mstart", "runtime.gopreempt_m", "runtime.goschedImpl", "runtime.netpoll", "runtime.startm", "runtime.stopm", "runtime.ready"}},
	{name: "request-id and origin memory", patterns: []string{modPath + "fsm.(*idMemory)", modPath + "fsm.digestOf", modPath + "fsm.(*dedupWindow)", modPath + "fsm.(*FSM).forget", modPath + "fsm.(*FSM).pruneMarks", modPath + "fsm.(*FSM).mayHaveForgotten"}},
	{name: "FSM apply (every replica)", patterns: []string{modPath + "fsm.", raftPath + "(*Raft).runFSM"}},
	{name: "log store (encode, write)", patterns: []string{modPath + "raftlog.", "github.com/cockroachdb/pebble", "github.com/hashicorp/raft-boltdb", "go.etcd.io/bbolt", "github.com/boltdb/bolt"}},
	{name: "raft port syscalls (read, write)", patterns: []string{"internal/poll.(*FD).Read", "internal/poll.(*FD).Write", "internal/poll.(*FD).Writev"}, within: raftPort},
	{name: "raft port TLS (crypto, records)", patterns: []string{"crypto/tls.", "crypto/internal/", "crypto/aes.", "crypto/cipher.", "vendor/golang.org/x/crypto/"}, within: raftPort},
	{name: "raft transport (frames)", patterns: []string{raftnetFn, raftmuxFn}},
	{name: "forwarding to leaders (peer RPC)", patterns: []string{peerrpcFn, forwardFn}},
	{name: "raft follower", patterns: []string{raftPath + "(*Raft).runFollower", raftPath + "(*Raft).appendEntries", raftPath + "(*Raft).processRPC", raftPath + "(*Raft).processHeartbeat", raftPath + "(*Raft).runCandidate"}},
	{name: "raft leader (replication, commit)", patterns: []string{raftPath}},
	{name: "admission and group commit", patterns: []string{modPath + "cluster.", modPath + "cluster/raftgroup.", modPath + "cluster/"}},
	{name: "gRPC (Envoy service)", patterns: []string{"google.golang.org/grpc", modPath + "server/envoyrls.", "golang.org/x/net/http2"}},
	{name: "HTTP in and out (API)", patterns: []string{"net/http.", modPath + "server/", "encoding/json.", "net/textproto."}},
	{name: "gossip (memberlist)", patterns: []string{"github.com/hashicorp/memberlist"}},
	{name: "metrics (Prometheus)", patterns: []string{"github.com/prometheus/"}},
}

// otherStage takes samples no stage matches: mostly runtime work with no
// caller of ours on the stack (timers, system calls of idle goroutines).
const otherStage = "other"

// stageNames lists every stage the ledger reports, in order.
func stageNames() []string {
	names := make([]string, 0, len(stages)+1)
	for _, s := range stages {
		names = append(names, s.name)
	}
	return append(names, otherStage)
}

// classify returns the CPU seconds of p's samples per stage name.
func classify(p *profile.Profile) map[string]float64 {
	cpu := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			cpu = i
		}
	}
	out := map[string]float64{}
	if cpu < 0 {
		return out
	}
	for _, s := range p.Sample {
		out[stageOf(s)] += float64(s.Value[cpu]) / 1e9
	}
	return out
}

// stageOf is the stage of one sample.
func stageOf(s *profile.Sample) string {
	var fns []string
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function != nil {
				fns = append(fns, line.Function.Name)
			}
		}
	}
	onStack := func(patterns []string) bool {
		for _, fn := range fns {
			for _, p := range patterns {
				if strings.HasPrefix(fn, p) {
					return true
				}
			}
		}
		return false
	}
	for _, st := range stages {
		if onStack(st.patterns) && (st.within == nil || onStack(st.within)) {
			return st.name
		}
	}
	return otherStage
}
