package client

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/quorate/quorate/api"
)

// A lane carries the decisions bound for one node, whichever groups it
// leads for them. While MaxInflight calls on the lane are outstanding, new
// decisions queue; when a call returns, everything queued (up to MaxBatch)
// leaves as one POST /v1/allow/batch.
// A lone decision on an idle lane goes at once (after CoalesceWindow, if
// set), so coalescing costs nothing when there is nothing to coalesce, and
// under load the number of calls follows the node's speed, not the
// callers' number: group commit, on the caller's side.
type lane struct {
	c    *Client
	node string

	// yield lets the callers a call has just answered run
	// (runtime.Gosched; a test's own in tests).
	yield func()

	mu       sync.Mutex
	inflight int
	queue    []*item
}

// settleYields bounds how many times a lane yields after a call before
// the next leaves (see settle).
const settleYields = 16

// item is one caller's decision waiting in a lane.
type item struct {
	ctx   context.Context
	req   api.AllowRequest
	until time.Time
	done  chan result // buffered: the sender never waits for the caller
}

type result struct {
	resp api.AllowResponse
	err  *Error
	// alone asks the caller to send its request again by itself: the batch
	// it travelled in was refused as a whole (one bad request refuses a
	// batch), which says nothing of this request.
	alone bool
}

// laneFor returns the lane to node. A lane is per node, not per group: the
// leader splits a call by group and decides the parts in parallel, one raft
// entry each, sharing its fsyncs, so a call waits for about one group's
// entry while carrying every group's decisions. Lanes per (node, group)
// made each call one entry but split the callers eight ways on one node:
// measured on one node, 64 goroutines, three alternated pairs, per node
// decided x1.02-x1.26 what per group did, with 22-36% less of the node's
// CPU and about 40% less of the client's per decision.
func (c *Client) laneFor(node string) *lane {
	c.lanesMu.Lock()
	defer c.lanesMu.Unlock()
	l := c.lanes[node]
	if l == nil {
		l = &lane{c: c, node: node, yield: runtime.Gosched}
		c.lanes[node] = l
	}
	return l
}

// do sends req through the lane and waits for its answer or ctx's end.
func (l *lane) do(ctx context.Context, req api.AllowRequest, until time.Time) (api.AllowResponse, *Error) {
	it := &item{ctx: ctx, req: req, until: until, done: make(chan result, 1)}
	l.mu.Lock()
	if l.inflight < l.c.cfg.MaxInflight {
		l.inflight++
		l.mu.Unlock()
		l.send(it)
	} else {
		l.queue = append(l.queue, it)
		l.mu.Unlock()
	}
	select {
	case r := <-it.done:
		if r.alone {
			return l.c.allowOne(ctx, l.node, req, until)
		}
		return r.resp, r.err
	case <-ctx.Done():
		// The request may be in a call already: its outcome is unknown.
		return api.AllowResponse{}, lost(l.node, ctx.Err())
	}
}

// send makes one call for first and whatever queued with it. If more
// queued meanwhile, a goroutine of the lane's own goes on with them (drain),
// so that the caller whose item led this call is not held up by others'.
func (l *lane) send(first *item) {
	l.call(l.gather(first))
	if next := l.next(); next != nil {
		go l.drain(next)
	}
}

// drain sends one batch after another for as long as decisions queue, then
// gives the call slot back. Under load one goroutine carries a lane's calls
// for as long as the load lasts, rather than one new goroutine a call
// growing its stack each time (6% of the client's CPU).
func (l *lane) drain(first *item) {
	for it := first; it != nil; it = l.next() {
		l.settle()
		l.call(l.gather(it))
	}
}

// settle runs before each call of a drain, just after the previous call's
// answers went out: it yields the processor for as long as the lane's
// queue grows, up to settleYields times. Callers that were just answered
// and ask again at once (a worker's loop, a handler's next request) then
// join this call instead of the one after it. Without it, the callers of
// a closed loop split into two waves that take turns, each call carrying
// half of them: measured against one node, 64 goroutines (loadgen -mode
// client), 32 decisions a call without and about 48 with. When no caller
// comes back, it costs one yield. (Each look at the queue takes the
// lane's lock; a yield costs far more than that uncontended lock.)
func (l *lane) settle() {
	n := l.queued()
	for range settleYields {
		if n >= l.c.cfg.MaxBatch-1 {
			return
		}
		l.yield()
		m := l.queued()
		if m == n {
			return
		}
		n = m
	}
}

// queued is the number of decisions waiting for the lane's next call.
func (l *lane) queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// gather is first and what queued behind it, up to MaxBatch.
func (l *lane) gather(first *item) []*item {
	if w := l.c.cfg.CoalesceWindow; w > 0 {
		time.Sleep(w) // a window for company: the caller asked for it
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(len(l.queue), l.c.cfg.MaxBatch-1)
	batch := make([]*item, 0, n+1)
	batch = append(append(batch, first), l.queue[:n]...)
	clear(l.queue[:n]) // the backing array outlives the items
	l.queue = l.queue[n:]
	return batch
}

// next takes the first queued item for the lane's next call or, with
// nothing queued, gives the lane's call slot back and returns nil.
func (l *lane) next() *item {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) == 0 {
		l.queue = nil // let the backing array go
		l.inflight--
		return nil
	}
	it := l.queue[0]
	l.queue[0] = nil
	l.queue = l.queue[1:]
	return it
}

// call sends batch and delivers each item's answer. Items whose callers
// gave up are left out before it is sent.
func (l *lane) call(batch []*item) {
	live := batch[:0]
	var until time.Time
	for _, it := range batch {
		if it.ctx.Err() != nil {
			it.done <- result{err: lost(l.node, it.ctx.Err())}
			continue
		}
		live = append(live, it)
		if it.until.After(until) {
			until = it.until
		}
	}
	if len(live) == 0 {
		return
	}
	// The call outlives any one caller: each stops waiting at its own
	// deadline, and the call at the latest of them.
	ctx := context.WithoutCancel(live[0].ctx)
	if len(live) == 1 {
		resp, err := l.c.allowOne(ctx, l.node, live[0].req, until)
		live[0].done <- result{resp: resp, err: err}
		return
	}
	reqs := make([]api.AllowRequest, len(live))
	for i, it := range live {
		reqs[i] = it.req
	}
	l.c.stats.batches.Add(1)
	l.c.stats.batched.Add(uint64(len(live)))
	resps, err := l.c.allowBatch(ctx, l.node, reqs, until)
	for i, it := range live {
		switch {
		case err == nil:
			it.done <- result{resp: resps[i]}
		case err.Kind() == api.Refused:
			it.done <- result{alone: true}
		default:
			it.done <- result{err: err}
		}
	}
}
