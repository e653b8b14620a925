// Package forward sends a node's allow requests to the leaders of the
// groups it does not serve, batched per leader: one Forwarder per leader
// address gathers what its callers queue and makes it one call (the Call
// the node gives it), each item keeping its own caller's deadline. A Pool
// holds a node's forwarders and retires those nothing was submitted to for
// a while. The wire between nodes is one raftnet call (OverNet), and the
// leader's side of it (Serve, serve.go) checks every item and hands it to
// its group's batcher.
package forward

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/fsm"
)

// Forwarder sends allow requests for groups led by one other node. Requests
// that queue while maxInflight calls are outstanding ride together in the
// next call, as they do in the leader's raft entries.
type Forwarder struct {
	addr     string
	call     Call
	in       chan *fwdItem
	inflight chan struct{}
	stop     chan struct{}
	closeErr error         // what callers are told once stop is closed
	exited   chan struct{} // closed once run has returned, queue drained
	wg       sync.WaitGroup
	used     atomic.Bool // submitted to since the last retirement sweep
}

type fwdItem struct {
	ctx   context.Context
	item  peerrpc.AllowItem
	done  chan fwdOutcome
	taken atomic.Bool // run has taken it from the queue
}

// fwdOutcome is what a forwarded item's caller is answered.
type fwdOutcome struct {
	decisions []fsm.Decision
	err       error
}

// Call sends one encoded peerrpc.AllowReq to the node at addr and
// returns its encoded answer. An error wraps ErrNotLeader if the request
// provably never left, errs.ErrOutcomeUnknown if it may have been acted on.
type Call func(ctx context.Context, addr string, body []byte) ([]byte, error)

// New starts a forwarder to the node at addr that keeps at most
// maxInflight calls outstanding.
func New(addr string, call Call, maxInflight int) *Forwarder {
	f := &Forwarder{
		addr:     addr,
		call:     call,
		in:       make(chan *fwdItem, 4096),
		inflight: make(chan struct{}, maxInflight),
		stop:     make(chan struct{}),
		exited:   make(chan struct{}),
	}
	f.used.Store(true)
	f.wg.Add(1)
	go f.run()
	return f
}

// Submit forwards one group's requests and waits for the leader's answer.
func (f *Forwarder) Submit(ctx context.Context, item peerrpc.AllowItem) ([]fsm.Decision, error) {
	if !f.used.Load() { // most submits find it set: no write to share
		f.used.Store(true)
	}
	it := &fwdItem{ctx: ctx, item: item, done: make(chan fwdOutcome, 1)}
	select {
	case f.in <- it:
	case <-f.stop:
		return nil, f.closeErr
	default:
		return nil, fmt.Errorf("%w: %d requests queued for %s", errs.ErrOverloaded, cap(f.in), f.addr)
	}
	exited := f.exited
	for {
		select {
		case o := <-it.done:
			return o.decisions, o.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: forwarded to %s: %w", errs.ErrOutcomeUnknown, f.addr, ctx.Err())
		case <-exited:
			// The queue send can win against a concurrent close: if run
			// left without taking it, nothing was sent.
			if !it.taken.Load() {
				return nil, f.closeErr
			}
			exited = nil
		}
	}
}

func (f *Forwarder) run() {
	defer f.wg.Done()
	defer close(f.exited)
	defer f.failQueued()
	for {
		var first *fwdItem
		select {
		case first = <-f.in:
			first.taken.Store(true)
		case <-f.stop:
			return
		}
		select {
		case f.inflight <- struct{}{}:
		case <-f.stop:
			first.done <- fwdOutcome{err: f.closeErr}
			return
		}
		items := []*fwdItem{first}
	gather:
		for len(items) < 1024 {
			select {
			case it := <-f.in:
				it.taken.Store(true)
				items = append(items, it)
			default:
				break gather
			}
		}
		go f.send(items)
	}
}

// send makes one call for items. Its deadline is the latest of theirs, so
// no caller is cut short by another's shorter deadline; each item carries
// its own, past which the leader proposes nothing for it, and each caller
// stops waiting at its own.
func (f *Forwarder) send(items []*fwdItem) {
	defer func() { <-f.inflight }()
	var (
		req                   peerrpc.AllowReq
		live                  []*fwdItem
		deadline, hasDeadline = items[0].ctx.Deadline()
	)
	for _, it := range items {
		if it.ctx.Err() != nil {
			it.done <- fwdOutcome{err: fmt.Errorf("%w: %w", errs.ErrNotLeader, it.ctx.Err())}
			continue
		}
		item := it.item
		d, ok := it.ctx.Deadline()
		if !ok {
			hasDeadline = false
		} else {
			item.Deadline = d.UnixNano()
			if hasDeadline && d.After(deadline) {
				deadline = d
			}
		}
		live = append(live, it)
		req.Items = append(req.Items, item)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	if hasDeadline {
		ctx, cancel = context.WithDeadline(context.Background(), deadline)
	}
	defer cancel()
	var resp peerrpc.AllowResp
	data, err := f.call(ctx, f.addr, peerrpc.AppendAllowReq(nil, req))
	if err == nil {
		if resp, err = peerrpc.DecodeAllowResp(data); err != nil {
			err = fmt.Errorf("%w: %s: %w", errs.ErrOutcomeUnknown, f.addr, err)
		}
	}
	if err == nil && len(resp.Items) != len(live) {
		err = fmt.Errorf("%w: forward to %s: %d answers for %d items", errs.ErrOutcomeUnknown, f.addr, len(resp.Items), len(live))
	}
	for i, it := range live {
		switch {
		case err != nil:
			it.done <- fwdOutcome{err: err}
		case resp.Items[i].Error != nil:
			it.done <- fwdOutcome{err: resp.Items[i].Error.Err()}
		default:
			it.done <- fwdOutcome{decisions: resp.Items[i].Decisions}
		}
	}
}

// failQueued answers everything still queued with closeErr: none of it
// was sent.
func (f *Forwarder) failQueued() {
	for {
		select {
		case it := <-f.in:
			it.taken.Store(true)
			it.done <- fwdOutcome{err: f.closeErr}
		default:
			return
		}
	}
}

// Close stops f; whatever it has not sent is answered err, which must say
// that nothing was sent (errs.ErrShuttingDown, or errs.ErrNotLeader to be retried).
func (f *Forwarder) Close(err error) {
	f.closeErr = err
	close(f.stop)
	f.wg.Wait()
}

// Pool holds one Forwarder per leader address.
type Pool struct {
	call        Call
	maxInflight int
	mu          sync.Mutex
	forwarders  map[string]*Forwarder
}

// NewPool returns an empty pool whose forwarders make their calls with
// call, each keeping at most maxInflight of them outstanding.
func NewPool(call Call, maxInflight int) *Pool {
	return &Pool{call: call, maxInflight: maxInflight, forwarders: map[string]*Forwarder{}}
}

// Get returns the forwarder to the node at addr, starting it if there is none.
func (p *Pool) Get(addr string) *Forwarder {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.forwarders[addr]
	if !ok {
		f = New(addr, p.call, p.maxInflight)
		p.forwarders[addr] = f
	}
	return f
}

// IdlePeriod is how often idle forwarders should be retired (RetireIdle):
// one nothing was submitted to goes within one to two of it.
const IdlePeriod = time.Minute

// RetireIdle closes the forwarders nothing was submitted to since the
// previous call, with nothing queued or in flight, and starts a new period
// for the others. Leaders move and nodes come and go under new addresses
// (a restarted pod often gets a new one), so without this every address
// ever forwarded to would keep a goroutine and its queue for the life of
// the process. A request that reaches a forwarder just as it is retired is
// answered errs.ErrNotLeader: nothing was sent, and the caller retries it
// on a new forwarder.
func (p *Pool) RetireIdle() {
	var retired []*Forwarder
	p.mu.Lock()
	for addr, f := range p.forwarders {
		if !f.used.Swap(false) && len(f.in) == 0 && len(f.inflight) == 0 {
			delete(p.forwarders, addr)
			retired = append(retired, f)
		}
	}
	p.mu.Unlock()
	for _, f := range retired {
		f.Close(fmt.Errorf("%w: the forwarder to %s was retired unused", errs.ErrNotLeader, f.addr))
	}
}

// Close closes every forwarder with err (see Forwarder.Close).
func (p *Pool) Close(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.forwarders {
		f.Close(err)
	}
}
