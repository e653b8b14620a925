package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/transport/raftnet"
)

// forwarder sends allow requests for groups led by one other node. Requests
// that queue while maxInflight calls are outstanding ride together in the
// next call, as they do in the leader's raft entries.
type forwarder struct {
	addr     string
	call     forwardCall
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

// forwardCall sends one encoded peerrpc.AllowReq to the node at addr and
// returns its encoded answer. An error wraps ErrNotLeader if the request
// provably never left, ErrOutcomeUnknown if it may have been acted on.
type forwardCall func(ctx context.Context, addr string, body []byte) ([]byte, error)

func newForwarder(addr string, call forwardCall, maxInflight int) *forwarder {
	f := &forwarder{
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

// submit forwards one group's requests and waits for the leader's answer.
func (f *forwarder) submit(ctx context.Context, item peerrpc.AllowItem) ([]fsm.Decision, error) {
	if !f.used.Load() { // most submits find it set: no write to share
		f.used.Store(true)
	}
	it := &fwdItem{ctx: ctx, item: item, done: make(chan fwdOutcome, 1)}
	select {
	case f.in <- it:
	case <-f.stop:
		return nil, f.closeErr
	default:
		return nil, fmt.Errorf("%w: %d requests queued for %s", ErrOverloaded, cap(f.in), f.addr)
	}
	exited := f.exited
	for {
		select {
		case o := <-it.done:
			return o.decisions, o.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: forwarded to %s: %w", ErrOutcomeUnknown, f.addr, ctx.Err())
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

func (f *forwarder) run() {
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
func (f *forwarder) send(items []*fwdItem) {
	defer func() { <-f.inflight }()
	var (
		req                   peerrpc.AllowReq
		live                  []*fwdItem
		deadline, hasDeadline = items[0].ctx.Deadline()
	)
	for _, it := range items {
		if it.ctx.Err() != nil {
			it.done <- fwdOutcome{err: fmt.Errorf("%w: %w", errNotLeader, it.ctx.Err())}
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
			err = fmt.Errorf("%w: %s: %w", ErrOutcomeUnknown, f.addr, err)
		}
	}
	if err == nil && len(resp.Items) != len(live) {
		err = fmt.Errorf("%w: forward to %s: %d answers for %d items", ErrOutcomeUnknown, f.addr, len(resp.Items), len(live))
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
func (f *forwarder) failQueued() {
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

// close stops f; whatever it has not sent is answered err, which must say
// that nothing was sent (ErrShuttingDown, or errNotLeader to be retried).
func (f *forwarder) close(err error) {
	f.closeErr = err
	close(f.stop)
	f.wg.Wait()
}

// forwarderFor returns the forwarder to the node at addr.
func (n *Node) forwarderFor(addr string) *forwarder {
	n.fwdMu.Lock()
	defer n.fwdMu.Unlock()
	f, ok := n.forwarders[addr]
	if !ok {
		f = newForwarder(addr, n.forward, 4)
		n.forwarders[addr] = f
	}
	return f
}

// forwarderIdle is how often idle forwarders are retired: one nothing was
// submitted to goes within one to two of it.
const forwarderIdle = time.Minute

// retireIdleForwarders closes the forwarders nothing was submitted to since
// the previous call, with nothing queued or in flight, and starts a new
// period for the others. Leaders move and nodes come and go under new
// addresses (a restarted pod often gets a new one), so without this every
// address ever forwarded to would keep a goroutine and its queue for the
// life of the process. A request that reaches a forwarder just as it is
// retired is answered errNotLeader: nothing was sent, and atLeader retries
// it on a new forwarder.
func (n *Node) retireIdleForwarders() {
	var retired []*forwarder
	n.fwdMu.Lock()
	for addr, f := range n.forwarders {
		if !f.used.Swap(false) && len(f.in) == 0 && len(f.inflight) == 0 {
			delete(n.forwarders, addr)
			retired = append(retired, f)
		}
	}
	n.fwdMu.Unlock()
	for _, f := range retired {
		f.close(fmt.Errorf("%w: the forwarder to %s was retired unused", errNotLeader, f.addr))
	}
}

// allowMethod is the raftnet method forwarded decisions are sent to.
const allowMethod = "allow"

// forward is the forwarders' forwardCall: one raftnet call on the shared
// connection to the leader, never an HTTP request.
func (n *Node) forward(ctx context.Context, addr string, body []byte) ([]byte, error) {
	out, err := n.net.Call(ctx, addr, allowMethod, body)
	var remote *raftnet.RemoteError
	switch {
	case err == nil:
		n.reach.contact(addr)
		return out, nil
	case errors.Is(err, raftnet.ErrNotSent):
		return nil, fmt.Errorf("%w: forward to %s: %w", errNotLeader, addr, err)
	case errors.As(err, &remote):
		// The leader refused the request whole (it did not decode):
		// nothing was decided.
		return nil, fmt.Errorf("forward to %s: refused: %w", addr, err)
	}
	return nil, fmt.Errorf("%w: forward to %s: %w", ErrOutcomeUnknown, addr, err)
}

// serveForwarded is the leader's side of forward. Decisions carry their
// policy's rate only once the cluster version says every member reads it:
// a node of the release before cannot decode the answer otherwise.
func (n *Node) serveForwarded(ctx context.Context, body []byte) ([]byte, error) {
	req, err := peerrpc.DecodeAllowReq(body)
	if err != nil {
		return nil, err
	}
	resp := n.allowLocalItems(ctx, req.Items)
	return peerrpc.AppendAllowResp(nil, resp, n.ClusterVersion() >= fsm.ClusterVersionOriginsAlways), nil
}
