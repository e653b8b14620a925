package cluster

import (
	"context"
	"fmt"
	"sync"

	"github.com/quorate/quorate/fsm"
)

// submission is one caller's requests waiting to ride in an allow entry.
type submission struct {
	ctx  context.Context
	reqs []fsm.AllowRequest
	done chan outcome // buffered: the batcher never blocks on a caller
}

type outcome struct {
	decisions []fsm.Decision
	err       error
}

// batcher group-commits decisions for one data group while this node leads
// it: whatever arrives while maxInflight entries are in flight is gathered
// into the next entry, so fsync and replication are paid per entry, not per
// request. Each entry is stamped with the leader's clock when it is built.
type batcher struct {
	g           *group
	clock       Clock
	maxBatch    int
	in          chan *submission
	inflight    chan struct{}
	stop        chan struct{}
	wg          sync.WaitGroup
	observeSize func(n int)
}

func newBatcher(g *group, clock Clock, maxBatch, maxInflight int, observeSize func(int)) *batcher {
	b := &batcher{
		g:           g,
		clock:       clock,
		maxBatch:    maxBatch,
		in:          make(chan *submission, 4*maxBatch),
		inflight:    make(chan struct{}, maxInflight),
		stop:        make(chan struct{}),
		observeSize: observeSize,
	}
	b.wg.Add(1)
	go b.run()
	return b
}

// submit queues reqs and waits for their decisions. An error means nothing
// was decided, except when ctx ends while the entry is in flight: then the
// outcome is unknown and a retry with the same request ids is the way to
// learn it.
func (b *batcher) submit(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
	if !b.g.serving.Load() {
		return nil, fmt.Errorf("%w: group %s", errNotLeader, b.g.id)
	}
	s := &submission{ctx: ctx, reqs: reqs, done: make(chan outcome, 1)}
	select {
	case b.in <- s:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: group %s: queue full: %w", errNotLeader, b.g.id, ctx.Err())
	case <-b.stop:
		return nil, ErrShuttingDown
	}
	select {
	case o := <-s.done:
		return o.decisions, o.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: group %s: outcome unknown: %w", ErrUnavailable, b.g.id, ctx.Err())
	}
}

func (b *batcher) run() {
	defer b.wg.Done()
	for {
		var first *submission
		select {
		case first = <-b.in:
		case <-b.stop:
			b.failQueued()
			return
		}
		// Wait for an in-flight slot before gathering, so that everything
		// arriving meanwhile joins this entry.
		select {
		case b.inflight <- struct{}{}:
		case <-b.stop:
			first.done <- outcome{err: ErrShuttingDown}
			b.failQueued()
			return
		}
		subs, n := []*submission{first}, len(first.reqs)
	gather:
		for n < b.maxBatch {
			select {
			case s := <-b.in:
				subs = append(subs, s)
				n += len(s.reqs)
			default:
				break gather
			}
		}
		b.propose(subs)
	}
}

// propose builds one allow entry from subs and hands it to raft; a
// goroutine delivers the results and frees the in-flight slot.
func (b *batcher) propose(subs []*submission) {
	live := subs[:0]
	var reqs []fsm.AllowRequest
	timeout := enqueueTimeout(context.Background())
	for _, s := range subs {
		if err := s.ctx.Err(); err != nil {
			s.done <- outcome{err: fmt.Errorf("%w: group %s: %w", errNotLeader, b.g.id, err)}
			continue
		}
		if !b.g.serving.Load() {
			s.done <- outcome{err: fmt.Errorf("%w: group %s", errNotLeader, b.g.id)}
			continue
		}
		timeout = min(timeout, enqueueTimeout(s.ctx))
		live = append(live, s)
		reqs = append(reqs, s.reqs...)
	}
	if len(live) == 0 {
		<-b.inflight
		return
	}
	if b.observeSize != nil {
		b.observeSize(len(reqs))
	}
	cmd := fsm.Allow{Stamp: b.clock.Now().UnixNano(), Requests: reqs}
	fut := b.g.raft.Apply(fsm.Encode(cmd), timeout)
	go func() {
		defer func() { <-b.inflight }()
		if err := fut.Error(); err != nil {
			err = raftError(b.g.id, err)
			for _, s := range live {
				s.done <- outcome{err: err}
			}
			return
		}
		res, ok := fut.Response().(*fsm.AllowResult)
		if !ok || len(res.Decisions) != len(reqs) {
			err := fmt.Errorf("group %s: unexpected apply result %T", b.g.id, fut.Response())
			for _, s := range live {
				s.done <- outcome{err: err}
			}
			return
		}
		off := 0
		for _, s := range live {
			s.done <- outcome{decisions: res.Decisions[off : off+len(s.reqs) : off+len(s.reqs)]}
			off += len(s.reqs)
		}
	}()
}

// failQueued answers everything still queued with ErrShuttingDown.
func (b *batcher) failQueued() {
	for {
		select {
		case s := <-b.in:
			s.done <- outcome{err: ErrShuttingDown}
		default:
			return
		}
	}
}

func (b *batcher) close() {
	close(b.stop)
	b.wg.Wait()
}
