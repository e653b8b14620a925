package memlimit

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/fsm"
)

// A node's memory budget (cluster.Options.MaxMemory) bounds what callers
// can make it hold. What grows with callers is state: a bucket per new
// client, a remembered decision per request id, on every replica of the
// group, for minutes. Once the live heap (estimated: see Budget.Check),
// plus what the decisions now pending may add (PerPending each), reaches
// ShedAt of the budget, a node refuses, at once and deciding nothing, every
// request that would add state (a client it holds no bucket for, or a
// request id) with errs.ErrOverloaded, and keeps deciding for the clients
// it holds, until reclaim and the request-id window bring the heap back
// under. The check runs on the node a call reaches and again on its group's
// leader. The process also sets 85% of the budget as the Go runtime's soft
// memory limit (cmd/quorate), so that the heap is collected more often as
// it nears the budget: what stays between the live heap and the budget is
// garbage not yet collected and memory not yet returned to the system.
const (
	// ShedAt is the share of the budget at which new state is refused.
	ShedAt = 0.7
	// CheckInterval is how often the node calls Budget.Check.
	CheckInterval = 100 * time.Millisecond
	// gcEvery is how often at most Check collects to learn the live heap
	// (see there).
	gcEvery = time.Second
	// PerPending is what a decision being decided may add once applied,
	// counted against the budget while it is pending: a bucket and a
	// remembered request id, with the longest client id and request id
	// (measured: about 1 KiB a bucket, 1.4 KiB an id).
	PerPending = 2560
)

// ErrBudget refuses a request that would add state while the node's live
// heap is near its budget. It wraps errs.ErrOverloaded: nothing was
// decided.
var ErrBudget = fmt.Errorf("%w: memory budget", errs.ErrOverloaded)

// IsRefusal reports whether err is the memory budget's refusal.
func IsRefusal(err error) bool { return errors.Is(err, ErrBudget) }

// Budget is a node's memory budget: the live heap as estimated from the
// last collection and the replicas' state since (Estimate), and whether
// the node sheds new state (High, Err). Its methods are safe for
// concurrent use.
type Budget struct {
	max     int64 // bytes; 0: no budget
	read    func() (live, objects, cycles uint64)
	state   func() int64 // the replicas' state size (fsm.FSM.StateBytes summed)
	pending func() int64 // decisions the node's callers wait for
	logger  *slog.Logger

	// atGC is the live heap the last collection found and the replicas'
	// state size then (see Estimate); shed whether the node refused new
	// state at Check's last run (for its log).
	atGC atomic.Pointer[heapAtGC]
	shed atomic.Bool
	// mu guards what Check keeps between runs: when it last collected,
	// and the collection count it last saw.
	mu     sync.Mutex
	gcAt   time.Time
	cycles uint64
}

// NewBudget returns a budget of max bytes (0 or less: none). read reads the
// runtime's heap (ReadHeap if nil: tests replace it), state the replicas'
// state size and pending the decisions waited for, both cheap enough for
// the decision path.
func NewBudget(max int64, read func() (live, objects, cycles uint64), state, pending func() int64, logger *slog.Logger) *Budget {
	if read == nil {
		read = ReadHeap
	}
	return &Budget{max: max, read: read, state: state, pending: pending, logger: logger}
}

// heapAtGC is what Check saw at the last collection.
type heapAtGC struct {
	live  uint64 // the runtime's live heap
	state int64  // the replicas' state size then
}

// Check reads the runtime's live heap after each collection, with the
// replicas' state size at that moment (see Estimate: the runtime's figure
// is as old as the last collection, and a collection may wait for the heap
// to double). When the heap's objects, garbage included, pass the shedding
// point while the live figure is under it, it collects (at most every
// second) to learn the truth.
func (b *Budget) Check() {
	b.mu.Lock()
	defer b.mu.Unlock()
	live, objects, cycles := b.read()
	limit := uint64(ShedAt * float64(b.max))
	if b.max > 0 && objects >= limit && live < limit && time.Since(b.gcAt) >= gcEvery {
		b.gcAt = time.Now()
		runtime.GC()
		live, _, cycles = b.read()
	}
	if at := b.atGC.Load(); at == nil || cycles != b.cycles || live != at.live {
		b.cycles = cycles
		b.atGC.Store(&heapAtGC{live: live, state: b.state()})
	}
	live = b.Estimate()
	shed := b.High()
	if b.shed.Swap(shed) != shed {
		if shed {
			b.logger.Warn("the live heap is near the memory budget: refusing new clients and request ids until it shrinks",
				"live_bytes", live, "budget_bytes", b.max)
		} else {
			b.logger.Info("the live heap is back under the memory budget", "live_bytes", live, "budget_bytes", b.max)
		}
	}
}

// Estimate is the live heap now: what the last collection found, plus what
// the replicas' state grew (or shrank) by since. State that went away is
// garbage, no longer live, so the estimate falls with it (reclaim, expired
// ids) without waiting for a collection, and state added counts at once.
// It is read on the decision path: a few atomic loads.
func (b *Budget) Estimate() uint64 {
	at := b.atGC.Load()
	if at == nil {
		return 0
	}
	return uint64(max(int64(at.live)+b.state()-at.state, 0))
}

// High reports whether the live heap estimate plus what the pending
// decisions may add reaches ShedAt of the budget.
func (b *Budget) High() bool {
	if b.max <= 0 {
		return false
	}
	return float64(b.Estimate())+float64(max(b.pending(), 0))*PerPending >= ShedAt*float64(b.max)
}

// Err returns ErrBudget if the node sheds new state and one of reqs would
// add some: it carries a request id, or its client is not known (known
// asks the client's group's replica).
func (b *Budget) Err(reqs []fsm.AllowRequest, known func(client string) bool) error {
	if !b.High() {
		return nil
	}
	for _, r := range reqs {
		if r.RequestID != "" || !known(r.Client) {
			return fmt.Errorf("%w: this node's live heap is %d MiB with %d decisions pending, of a %d MiB budget; it decides for the clients it holds, without request ids",
				ErrBudget, b.Estimate()>>20, b.pending(), b.max>>20)
		}
	}
	return nil
}

// Shedding reports whether the node refused new state at the last Check.
func (b *Budget) Shedding() bool { return b.shed.Load() }

// Max returns the budget in bytes (0: none).
func (b *Budget) Max() int64 { return b.max }
