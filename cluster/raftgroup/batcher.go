package raftgroup

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/fsm"
)

// Clock is the node's source of time. The leader of a group stamps every
// entry it proposes with Clock.Now(); nothing else in the decision path
// reads time. Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
}

// submission is one caller's requests waiting to ride in an allow entry.
type submission struct {
	ctx      context.Context
	reqs     []fsm.AllowRequest
	done     chan outcome // buffered: the Batcher never blocks on a caller
	answered atomic.Bool
	taken    atomic.Bool // run has taken it from the queue
}

// answer delivers o unless the submission was answered already (by the
// batcher's abandon, racing a late answer from raft).
func (s *submission) answer(o outcome) {
	if s.answered.CompareAndSwap(false, true) {
		s.done <- o
	}
}

type outcome struct {
	decisions []fsm.Decision
	err       error
}

// Batcher group-commits decisions for one data group while this node leads
// it: whatever arrives while maxInflight entries are in flight is gathered
// into the next entry, so fsync and replication are paid per entry, not per
// request. Each entry is stamped with the leader's clock when it is built.
//
// Two goroutines do the work: run gathers and proposes, complete waits for
// each entry's future and answers its callers. Raft finishes a group's
// futures in log order, so complete takes them in the order proposed.
//
// hashicorp/raft does not answer every future when it shuts down: an entry
// committed but not yet applied is dropped with its future still open. So
// after raft has shut down, abandon answers every caller still waiting with
// an unknown outcome, and complete may stay blocked on such a future for good
// (one goroutine per closed group).
type Batcher struct {
	g             *Group
	clock         Clock
	maxBatch      int
	observeSize   func(n int)
	notConfigured func()                              // asks for the configuration to be installed
	admit         func(reqs []fsm.AllowRequest) error // the node's client budget

	in      chan *submission
	slots   chan struct{}  // one per entry in flight, maxInflight in all
	pending chan entry     // proposed entries, oldest first (never more than maxInflight)
	stop    chan struct{}  // closed by close
	exited  chan struct{}  // closed when run has returned
	running sync.WaitGroup // run

	mu        sync.Mutex
	current   *entry // the entry complete waits on, nil between entries
	abandoned error  // set by abandon: the answer for entries not yet waited on
}

// entry is one proposed allow entry and the submissions riding in it.
type entry struct {
	fut  raft.ApplyFuture
	subs []*submission
	n    int // decisions
}

// NewBatcher starts group-committing decisions of data group g: entries of
// at most maxBatch decisions, maxInflight of them in flight at once, each
// stamped with clock. observeSize sees each entry's size, notConfigured is
// called while g has no configuration, and admit may refuse requests (the
// node's client budget) before they queue.
func NewBatcher(g *Group, clock Clock, maxBatch, maxInflight int, observeSize func(int), notConfigured func(), admit func([]fsm.AllowRequest) error) *Batcher {
	b := &Batcher{
		g:             g,
		notConfigured: notConfigured,
		admit:         admit,
		clock:         clock,
		maxBatch:      maxBatch,
		in:            make(chan *submission, 4*maxBatch),
		slots:         make(chan struct{}, maxInflight),
		pending:       make(chan entry, maxInflight),
		stop:          make(chan struct{}),
		exited:        make(chan struct{}),
		observeSize:   observeSize,
	}
	b.running.Add(1)
	go b.run()
	go b.complete()
	return b
}

// Submit queues reqs and waits for their decisions. An error means nothing
// was decided, except when ctx ends while the entry is in flight: then the
// outcome is unknown and a retry with the same request ids is the way to
// learn it.
func (b *Batcher) Submit(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
	p, err := b.Start(ctx, reqs)
	if err != nil {
		return nil, err
	}
	return p.Wait()
}

// Pending is a submission on its way into an entry (see Start).
type Pending struct {
	b *Batcher
	s submission
}

// Start queues reqs without waiting for their decisions: Pending.Wait
// does, as Submit would. An error means nothing was queued.
//
// reqs must be valid (fsm.Validate): the node checks a request once, where
// it enters (the HTTP and gRPC decoders, forward.Serve for a peer's), and
// apply checks every entry again. An invalid request here would have apply
// refuse its whole entry, and with it every caller riding in it.
func (b *Batcher) Start(ctx context.Context, reqs []fsm.AllowRequest) (*Pending, error) {
	if !b.g.serving.Load() {
		return nil, fmt.Errorf("%w: group %s", errs.ErrNotLeader, b.g.ID)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: group %s: %w", errs.ErrNotLeader, b.g.ID, err) // nothing proposed
	}
	if b.g.FSM.ConfigVersion() == 0 {
		// A new cluster's configuration reaches each data group as an entry
		// of its own log; until it has, the group would decide with the
		// built-in default instead of the cluster's. Nothing is appended, so
		// the caller retries, and the leader installs it in the meantime.
		b.notConfigured()
		return nil, fmt.Errorf("%w: group %s has no configuration yet", errs.ErrNotLeader, b.g.ID)
	}
	if b.admit != nil {
		if err := b.admit(reqs); err != nil {
			return nil, fmt.Errorf("group %s: %w", b.g.ID, err)
		}
	}
	p := &Pending{b: b, s: submission{ctx: ctx, reqs: reqs, done: make(chan outcome, 1)}}
	select {
	case b.in <- &p.s:
		return p, nil
	case <-b.stop:
		return nil, errs.ErrShuttingDown
	default:
		// A full queue is more work than the group can commit before
		// callers give up: refuse at once rather than let them wait out
		// their deadlines.
		return nil, fmt.Errorf("%w: group %s: %d submissions queued", errs.ErrOverloaded, b.g.ID, cap(b.in))
	}
}

// Wait waits for the decisions of p's requests, or for the end of the
// context Start was given; its error means what Submit's does.
func (p *Pending) Wait() ([]fsm.Decision, error) {
	s, exited := &p.s, p.b.exited
	for {
		select {
		case o := <-s.done:
			return o.decisions, o.err
		case <-s.ctx.Done():
			return nil, fmt.Errorf("%w: group %s: %w", errs.ErrOutcomeUnknown, p.b.g.ID, s.ctx.Err())
		case <-exited:
			// The queue send can win against a concurrent close: if run
			// left without taking s, nothing was proposed for it.
			if !s.taken.Load() {
				s.answer(outcome{err: errs.ErrShuttingDown})
			}
			exited = nil
		}
	}
}

func (b *Batcher) run() {
	defer b.running.Done()
	defer close(b.exited)
	defer close(b.pending) // complete answers what is in flight, then returns
	var (
		subs  []*submission
		reqs  []fsm.AllowRequest
		buf   []byte
		carry *submission // taken but did not fit the last entry: first of the next
	)
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-b.in:
				first.taken.Store(true)
			case <-b.stop:
				b.failQueued()
				return
			}
		}
		// Wait for an in-flight slot before gathering, so that everything
		// arriving meanwhile joins this entry.
		select {
		case b.slots <- struct{}{}:
		case <-b.stop:
			first.answer(outcome{err: errs.ErrShuttingDown})
			b.failQueued()
			return
		}
		subs, n := append(subs[:0], first), len(first.reqs)
	gather:
		for n < b.maxBatch {
			select {
			case s := <-b.in:
				s.taken.Store(true)
				if n+len(s.reqs) > b.maxBatch {
					// An entry never carries more than maxBatch decisions
					// (validated submissions are at most fsm.MaxBatch).
					carry = s
					break gather
				}
				subs = append(subs, s)
				n += len(s.reqs)
			default:
				break gather
			}
		}
		var e entry
		e, reqs, buf = b.propose(subs, reqs[:0], buf[:0])
		if e.fut == nil {
			<-b.slots
			continue
		}
		b.pending <- e // never blocks: a slot is held for it
	}
}

// propose builds one allow entry from the live submissions of subs and
// hands it to raft. reqs and buf are scratch space, returned for reuse.
func (b *Batcher) propose(subs []*submission, reqs []fsm.AllowRequest, buf []byte) (entry, []fsm.AllowRequest, []byte) {
	live := make([]*submission, 0, len(subs))
	timeout := enqueueTimeout(context.Background())
	for _, s := range subs {
		if err := s.ctx.Err(); err != nil {
			s.answer(outcome{err: fmt.Errorf("%w: group %s: %w", errs.ErrNotLeader, b.g.ID, err)})
			continue
		}
		if !b.g.serving.Load() {
			s.answer(outcome{err: fmt.Errorf("%w: group %s", errs.ErrNotLeader, b.g.ID)})
			continue
		}
		timeout = min(timeout, enqueueTimeout(s.ctx))
		live = append(live, s)
		reqs = append(reqs, s.reqs...)
	}
	if len(live) == 0 {
		return entry{}, reqs, buf
	}
	if b.observeSize != nil {
		b.observeSize(len(reqs))
	}
	// raft keeps the entry's bytes, so they are copied out of buf.
	buf = fsm.AppendCommand(buf, fsm.Allow{Stamp: b.clock.Now().UnixNano(), Requests: reqs})
	fut := b.g.Raft.Apply(bytes.Clone(buf), timeout)
	return entry{fut: fut, subs: live, n: len(reqs)}, reqs, buf
}

// complete answers the callers of each proposed entry once raft has
// decided it.
func (b *Batcher) complete() {
	for e := range b.pending {
		b.mu.Lock()
		if b.abandoned != nil {
			for _, s := range e.subs {
				s.answer(outcome{err: b.abandoned})
			}
			b.mu.Unlock()
			continue
		}
		b.current = &e
		b.mu.Unlock()
		b.deliver(e)
		b.mu.Lock()
		b.current = nil
		b.mu.Unlock()
		<-b.slots
	}
}

func (b *Batcher) deliver(e entry) {
	if err := e.fut.Error(); err != nil {
		err = raftError(b.g.ID, err)
		for _, s := range e.subs {
			s.answer(outcome{err: err})
		}
		return
	}
	res, ok := e.fut.Response().(*fsm.AllowResult)
	if !ok || len(res.Decisions) != e.n {
		err := fmt.Errorf("group %s: unexpected apply result %T", b.g.ID, e.fut.Response())
		for _, s := range e.subs {
			s.answer(outcome{err: err})
		}
		return
	}
	off := 0
	for _, s := range e.subs {
		s.answer(outcome{decisions: res.Decisions[off : off+len(s.reqs) : off+len(s.reqs)]})
		off += len(s.reqs)
	}
}

// failQueued answers everything still queued with errs.ErrShuttingDown.
func (b *Batcher) failQueued() {
	for {
		select {
		case s := <-b.in:
			s.taken.Store(true)
			s.answer(outcome{err: errs.ErrShuttingDown})
		default:
			return
		}
	}
}

// close stops taking submissions and answers those queued with
// errs.ErrShuttingDown. Entries in flight are answered when raft finishes them, or
// by abandon.
func (b *Batcher) close() {
	close(b.stop)
	b.running.Wait()
}

// abandon answers, with an unknown outcome, every caller of an entry raft
// has not answered; call it once raft has shut down (see Batcher). An entry
// raft had committed is applied when the group next starts, so the outcome
// is unknown, not "not decided".
func (b *Batcher) abandon() {
	err := fmt.Errorf("%w: group %s: the node shut down with the entry in flight", errs.ErrOutcomeUnknown, b.g.ID)
	b.mu.Lock()
	b.abandoned = err
	if b.current != nil {
		for _, s := range b.current.subs {
			s.answer(outcome{err: err})
		}
	}
	b.mu.Unlock()
	// complete and abandon may both take from pending (closed by run, which
	// close has waited for): whichever takes an entry answers it.
	for e := range b.pending {
		for _, s := range e.subs {
			s.answer(outcome{err: err})
		}
	}
}
