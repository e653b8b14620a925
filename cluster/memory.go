package cluster

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/quorate/quorate/cluster/memlimit"
	"github.com/quorate/quorate/fsm"
)

// The memory budget (Options.MaxMemory) bounds what callers can make a node
// hold. What grows with callers is state: a bucket per new client, a
// remembered decision per request id, on every replica of the group, for
// minutes. Once the live heap (estimated: see checkMemory), plus what the
// decisions now pending may add (memoryPerPending each), reaches
// memoryShedAt of the budget, a node
// refuses, at once and deciding nothing, every request that would add
// state (a client it holds no bucket for, or a request id) with
// ErrOverloaded, and keeps deciding for the clients it holds, until reclaim
// and the request-id window bring the heap back under. The check runs on
// the node a call reaches and again on its group's leader. The process
// also sets 85% of the budget as the Go runtime's soft memory limit
// (cmd/quorate), so that the heap is collected more often as it nears the
// budget: what stays between the live heap and the budget is garbage not
// yet collected and memory not yet returned to the system.
const (
	memoryShedAt        = 0.7
	memoryCheckInterval = 100 * time.Millisecond
	// memoryGCEvery is how often at most checkMemory collects to learn the
	// live heap (see there).
	memoryGCEvery = time.Second
	// memoryPerPending is what a decision being decided may add once
	// applied, counted against the budget while it is pending: a bucket
	// and a remembered request id, with the longest client id and request
	// id (measured: about 1 KiB a bucket, 1.4 KiB an id).
	memoryPerPending = 2560
)

// errMemoryBudget refuses a request that would add state while the node's
// live heap is near its budget. It wraps ErrOverloaded: nothing was decided.
var errMemoryBudget = fmt.Errorf("%w: memory budget", ErrOverloaded)

// stateBytes is what the state of this node's replicas costs, as their
// FSMs estimate it (fsm.FSM.StateBytes).
func (n *Node) stateBytes() int64 {
	var b int64
	for _, g := range n.allGroups() {
		b += g.FSM.StateBytes()
	}
	return b
}

// checkMemory reads the runtime's live heap after each collection, with the
// replicas' state size at that moment (see memoryEstimate: the runtime's
// figure is as old as the last collection, and a collection may wait for
// the heap to double). When the heap's objects, garbage included, pass the
// shedding point while the live figure is under it, it collects (at most
// every memoryGCEvery) to learn the truth.
func (n *Node) checkMemory() {
	read := n.opts.readHeap
	if read == nil {
		read = memlimit.ReadHeap
	}
	n.memMu.Lock()
	defer n.memMu.Unlock()
	live, objects, cycles := read()
	limit := uint64(memoryShedAt * float64(n.opts.MaxMemory))
	if n.opts.MaxMemory > 0 && objects >= limit && live < limit && time.Since(n.memGC) >= memoryGCEvery {
		n.memGC = time.Now()
		runtime.GC()
		live, _, cycles = read()
	}
	if at := n.memAtGC.Load(); at == nil || cycles != n.memCycles || live != at.live {
		n.memCycles = cycles
		n.memAtGC.Store(&heapAtGC{live: live, state: n.stateBytes()})
	}
	live = n.memoryEstimate()
	shed := n.memoryHigh()
	if n.memShed.Swap(shed) != shed {
		if shed {
			n.logger.Warn("the live heap is near the memory budget: refusing new clients and request ids until it shrinks",
				"live_bytes", live, "budget_bytes", n.opts.MaxMemory)
		} else {
			n.logger.Info("the live heap is back under the memory budget", "live_bytes", live, "budget_bytes", n.opts.MaxMemory)
		}
	}
}

// heapAtGC is what checkMemory saw at the last collection.
type heapAtGC struct {
	live  uint64 // the runtime's live heap
	state int64  // the replicas' StateBytes then
}

// memoryEstimate is the live heap now: what the last collection found, plus
// what the replicas' state grew (or shrank) by since. State that went away
// is garbage, no longer live, so the estimate falls with it (reclaim,
// expired ids) without waiting for a collection, and state added counts
// at once. It is read on the decision path: a few atomic loads.
func (n *Node) memoryEstimate() uint64 {
	at := n.memAtGC.Load()
	if at == nil {
		return 0
	}
	return uint64(max(int64(at.live)+n.stateBytes()-at.state, 0))
}

// memoryHigh reports whether the live heap estimate plus what the pending
// decisions may add reaches memoryShedAt of the budget.
func (n *Node) memoryHigh() bool {
	if n.opts.MaxMemory <= 0 {
		return false
	}
	return float64(n.memoryEstimate())+float64(max(n.pending.Load(), 0))*memoryPerPending >= memoryShedAt*float64(n.opts.MaxMemory)
}

// memoryErr returns errMemoryBudget if the node sheds new state and one of
// reqs would add some. g is the group every request belongs to, or nil.
func (n *Node) memoryErr(g groupReplica, reqs []fsm.AllowRequest) error {
	if !n.memoryHigh() {
		return nil
	}
	for _, r := range reqs {
		rg := g
		if rg == nil {
			rg = n.groupFor(r.Client).FSM
		}
		if r.RequestID != "" || !rg.Known(r.Client) {
			return fmt.Errorf("%w: this node's live heap is %d MiB with %d decisions pending, of a %d MiB budget; it decides for the clients it holds, without request ids",
				errMemoryBudget, n.memoryEstimate()>>20, n.pending.Load(), n.opts.MaxMemory>>20)
		}
	}
	return nil
}

// groupReplica is what memoryErr asks of a group's replica.
type groupReplica interface{ Known(client string) bool }

var _ groupReplica = (*fsm.FSM)(nil)

// isMemoryRefusal reports whether err is the memory budget's refusal.
func isMemoryRefusal(err error) bool { return errors.Is(err, errMemoryBudget) }
