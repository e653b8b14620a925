package raftnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// peer is this node's way to one other node: at most one connection,
// dialled on first use and again after it breaks.
type peer struct {
	net  *Net
	addr string

	mu      sync.Mutex
	conn    *clientConn
	dialing *dialAttempt
	closed  bool
}

type dialAttempt struct {
	done chan struct{}
	conn *clientConn
	err  error
}

func newPeer(n *Net, addr string) *peer { return &peer{net: n, addr: addr} }

// get returns the peer's live connection, dialling if there is none; every
// caller waiting meanwhile shares the one dial.
func (p *peer) get(ctx context.Context) (*clientConn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if c := p.conn; c != nil {
		p.mu.Unlock()
		return c, nil
	}
	a := p.dialing
	if a == nil {
		a = &dialAttempt{done: make(chan struct{})}
		p.dialing = a
		go p.dial(a)
	}
	p.mu.Unlock()
	select {
	case <-a.done:
		return a.conn, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *peer) dial(a *dialAttempt) {
	n := p.net
	n.stats.dials.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.DialTimeout)
	conn, err := n.layer.DialContext(ctx, "tcp", p.addr)
	cancel()
	if err == nil {
		_ = conn.SetWriteDeadline(time.Now().Add(n.opts.DialTimeout))
		if _, err = conn.Write(preamble(streamMux)); err != nil {
			conn.Close()
		}
	}
	p.mu.Lock()
	p.dialing = nil
	switch {
	case err != nil:
		n.stats.dialFailures.Add(1)
		a.err = fmt.Errorf("%w: dial %s: %w", ErrNotSent, p.addr, err)
	case p.closed:
		conn.Close()
		a.err = ErrClosed
	default:
		n.stats.dialsOK.Add(1)
		a.conn = newClientConn(p, conn)
		p.conn = a.conn
	}
	p.mu.Unlock()
	close(a.done)
}

// drop forgets c once it broke, so the next call dials again.
func (p *peer) drop(c *clientConn) {
	p.mu.Lock()
	if p.conn == c {
		p.conn = nil
	}
	p.mu.Unlock()
}

func (p *peer) close() {
	p.mu.Lock()
	p.closed = true
	c := p.conn
	p.conn = nil
	p.mu.Unlock()
	if c != nil {
		c.fail(ErrClosed)
	}
}

// call sends one request and waits for its answer: encode appends the body
// to the frame, decode reads the answer's body (on this goroutine). A lazy
// request may wait for the tick; others are written at once. Without a
// deadline the call is bounded by Options.Timeout (with one, by whichever
// comes first; the deadline ends ctx too); it also ends when stop
// is closed (its group's transport closed).
func (p *peer) call(ctx context.Context, stop <-chan struct{}, k kind, group string, deadline time.Time, lazy bool,
	encode func([]byte) []byte, decode func([]byte) error) error {
	c, err := p.get(ctx)
	if err != nil {
		if !errors.Is(err, ErrNotSent) {
			err = fmt.Errorf("%w: %w", ErrNotSent, err) // waiting for a dial, or closed
		}
		return err
	}
	seq := c.seq.Add(1)
	frame := endFrame(encode(beginRequest(getBuf(), k, seq, group, deadline)))
	if len(frame)-4 > p.net.opts.MaxFrame {
		n := len(frame)
		putBuf(frame)
		return fmt.Errorf("%w: %s of %d bytes to %s, at most %d", ErrNotSent, k, n, p.addr, p.net.opts.MaxFrame)
	}
	ch := make(chan reply, 1)
	if err := c.enqueue(outFrame{seq: seq, group: group, b: frame}, ch, lazy); err != nil {
		return err
	}
	wait := p.net.opts.Timeout
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case r := <-ch:
		switch {
		case r.err != nil:
			return r.err
		case r.status == statusError:
			return &RemoteError{Msg: string(r.body)}
		}
		return decode(r.body)
	case <-timer.C:
		c.forget(seq)
		err := fmt.Errorf("raftnet: %s to %s: no answer in %v", k, p.addr, wait)
		c.checkStuck()
		return err
	case <-ctx.Done():
		c.forget(seq)
		c.checkStuck()
		return ctx.Err()
	case <-stop:
		c.forget(seq)
		return raft.ErrTransportShutdown
	case <-p.net.done:
		c.forget(seq)
		return ErrClosed
	}
}

// outFrame is a request waiting for the writer.
type outFrame struct {
	seq   uint64
	group string
	b     []byte
}

type reply struct {
	status byte
	body   []byte
	err    error
}

// clientConn is one dialled connection: a writer goroutine that sends the
// queued requests, holding lazy ones for the tick, and a reader goroutine
// that hands each answer to its caller.
type clientConn struct {
	p     *peer
	conn  net.Conn
	kick  chan struct{}
	done  chan struct{}
	seq   atomic.Uint64
	start time.Time // monotonic base of waiting
	// waiting is when the first request queued since the last frame was
	// read was queued (0: none), as an offset from start, so a wall-clock
	// step cannot fake or hide a stall.
	waiting atomic.Int64

	mu      sync.Mutex
	err     error
	pending map[uint64]chan reply
	queue   []outFrame
	urgent  bool
}

func newClientConn(p *peer, conn net.Conn) *clientConn {
	c := &clientConn{
		p:       p,
		conn:    conn,
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		start:   time.Now(),
		pending: map[uint64]chan reply{},
	}
	p.net.wg.Add(2)
	go c.writeLoop()
	go c.readLoop()
	return c
}

// since is the monotonic offset of now from c.start, never 0.
func (c *clientConn) since() int64 { return int64(time.Since(c.start)) + 1 }

// checkStuck fails the connection if requests have gone unanswered for a
// whole Timeout with nothing at all read meanwhile. Every call that ends
// unanswered checks, whatever its own deadline, so callers with short
// deadlines detect a dead connection too.
func (c *clientConn) checkStuck() {
	w := c.waiting.Load()
	if w == 0 || time.Duration(c.since()-w) < c.p.net.opts.Timeout {
		return
	}
	c.fail(fmt.Errorf("raftnet: connection to %s: nothing read for %v while requests waited", c.p.addr, c.p.net.opts.Timeout))
}

func (c *clientConn) enqueue(f outFrame, ch chan reply, lazy bool) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		putBuf(f.b)
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	c.pending[f.seq] = ch
	c.queue = append(c.queue, f)
	c.waiting.CompareAndSwap(0, c.since())
	// Wake the writer only when it must act: for the first request queued
	// (it then waits for the tick) or the first urgent one. A lazy request
	// joining a queue that waits anyway costs no wakeup.
	wake := len(c.queue) == 1
	if lazy {
		c.p.net.stats.lazy.Add(1)
	} else {
		c.p.net.stats.urgent.Add(1)
		wake = wake || !c.urgent
		c.urgent = true
	}
	c.mu.Unlock()
	if wake {
		c.wake()
	}
	return nil
}

func (c *clientConn) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// hurry makes group's queued requests go at the next wakeup instead of the
// tick (Transport.Hurry).
func (c *clientConn) hurry(group string) {
	c.mu.Lock()
	found := false
	for _, f := range c.queue {
		if f.group == group {
			found = true
			break
		}
	}
	wake := found && !c.urgent
	if found {
		c.urgent = true
	}
	c.mu.Unlock()
	if wake {
		c.wake()
	}
}

func (c *clientConn) forget(seq uint64) {
	c.mu.Lock()
	delete(c.pending, seq)
	c.mu.Unlock()
}

// fail breaks the connection: every waiting call gets err, and those whose
// request was still queued (never written) get it marked ErrNotSent.
func (c *clientConn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	queue := c.queue
	c.queue = nil
	close(c.done)
	c.mu.Unlock()
	c.p.drop(c)
	c.conn.Close()
	notSent := fmt.Errorf("%w: %w", ErrNotSent, err)
	for _, f := range queue {
		if ch, ok := pending[f.seq]; ok {
			ch <- reply{err: notSent}
			delete(pending, f.seq)
		}
		putBuf(f.b)
	}
	for _, ch := range pending {
		ch <- reply{err: err}
	}
	if !errors.Is(err, ErrClosed) {
		c.p.net.logger.Debug("raftnet: connection to peer broke", "peer", c.p.addr, "err", err)
	}
}

func (c *clientConn) writeLoop() {
	defer c.p.net.wg.Done()
	n := c.p.net
	bw := bufio.NewWriterSize(c.conn, 64<<10)
	var (
		batch  []outFrame
		frames [][]byte
	)
	for {
		select {
		case <-c.kick:
		case <-c.done:
			return
		}
		c.mu.Lock()
		if len(c.queue) == 0 || c.err != nil {
			c.mu.Unlock()
			continue
		}
		if !c.urgent {
			c.mu.Unlock()
			if !c.waitTick() {
				return
			}
			c.mu.Lock()
			if c.err != nil {
				c.mu.Unlock()
				return
			}
		}
		batch, c.queue = c.queue, batch[:0]
		c.urgent = false
		c.mu.Unlock()
		frames = frames[:0]
		for _, f := range batch {
			frames = append(frames, f.b)
		}
		if err := writeBatch(c.conn, bw, frames, n.opts.Timeout); err != nil {
			c.fail(fmt.Errorf("raftnet: write to %s: %w", c.p.addr, err))
			return
		}
		n.stats.requests.Add(uint64(len(batch)))
		n.stats.writes.Add(1)
		clear(batch)
		clear(frames)
	}
}

// waitTick waits for the next multiple of the tick, or for an urgent
// request; false if the connection broke meanwhile.
func (c *clientConn) waitTick() bool {
	tick := c.p.net.opts.Tick
	now := time.Now()
	t := time.NewTimer(now.Truncate(tick).Add(tick).Sub(now))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-c.kick:
			c.mu.Lock()
			urgent := c.urgent
			c.mu.Unlock()
			if urgent {
				return true
			}
		case <-c.done:
			return false
		}
	}
}

// writeBatch writes frames in one flush (as few writes as bufio needs),
// returning their buffers to the pool.
func writeBatch(conn net.Conn, bw *bufio.Writer, frames [][]byte, timeout time.Duration) error {
	_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	var err error
	for _, f := range frames {
		if err == nil {
			_, err = bw.Write(f)
		}
		putBuf(f)
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

func (c *clientConn) readLoop() {
	defer c.p.net.wg.Done()
	n := c.p.net
	br := bufio.NewReaderSize(c.conn, 64<<10)
	for {
		b, err := readFrame(br, nil, n.opts.MaxFrame)
		if err != nil {
			c.fail(fmt.Errorf("raftnet: read from %s: %w", c.p.addr, err))
			return
		}
		c.waiting.Store(0)
		seq, status, body, err := parseResponse(b)
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		ch := c.pending[seq]
		delete(c.pending, seq)
		c.mu.Unlock()
		if ch != nil {
			ch <- reply{status: status, body: body}
		}
	}
}

// Frame buffers are pooled: heartbeats and small appends reuse them.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func getBuf() []byte { return (*bufPool.Get().(*[]byte))[:0] }

func putBuf(b []byte) {
	if cap(b) > 1<<20 {
		return // do not keep a large append's buffer alive
	}
	bufPool.Put(&b)
}
