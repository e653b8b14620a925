package raftnet

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// serve runs one accepted stream until it closes.
func (n *Net) serve(conn net.Conn) {
	br := bufio.NewReaderSize(conn, 64<<10)
	_ = conn.SetReadDeadline(time.Now().Add(n.opts.DialTimeout))
	t, err := readPreamble(br)
	if err != nil {
		n.logger.Warn("raftnet: refused a stream", "remote", conn.RemoteAddr(), "err", err)
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	if t == streamSnap {
		n.serveSnapshot(conn, br)
		return
	}
	s := &serverConn{n: n, conn: conn, kick: make(chan struct{}, 1), done: make(chan struct{})}
	s.bw = bufio.NewWriterSize(conn, 64<<10)
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		conn.Close()
		return
	}
	n.accepted[s] = struct{}{}
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.accepted, s)
		n.mu.Unlock()
	}()
	n.wg.Add(1)
	go s.writeLoop()
	s.readLoop(br)
}

// serverConn is an accepted 'M' stream: its reader dispatches requests and
// its writer sends the answers, several per write when they are ready
// together.
type serverConn struct {
	n    *Net
	conn net.Conn
	kick chan struct{}
	done chan struct{}

	wmu sync.Mutex // guards bw: the reader and the writer both write
	bw  *bufio.Writer

	mu     sync.Mutex
	queue  [][]byte
	closed bool
}

// write writes frames and flushes them, returning their buffers.
func (s *serverConn) write(frames [][]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return writeBatch(s.conn, s.bw, frames, s.n.opts.Timeout)
}

func (s *serverConn) readLoop(br *bufio.Reader) {
	defer s.close()
	var held [][]byte // heartbeat answers for what arrived together
	for {
		b, err := readFrame(br, nil, s.n.opts.MaxFrame)
		if err != nil {
			return
		}
		q, err := parseRequest(b)
		if err != nil {
			s.n.logger.Warn("raftnet: bad request frame; closing the stream", "remote", s.conn.RemoteAddr(), "err", err)
			return
		}
		s.n.stats.served.Add(1)
		switch q.kind {
		case kindHeartbeat:
			if resp := s.heartbeat(q); resp != nil {
				held = append(held, resp)
			}
		case kindCall:
			go s.call(q)
		default:
			go s.dispatch(q)
		}
		if len(held) > 0 && br.Buffered() == 0 {
			// Everything that arrived together is handled: answer its
			// heartbeats in one write from here, without waking the writer.
			if err := s.write(held); err != nil {
				return
			}
			s.n.stats.servedWrites.Add(1)
			clear(held)
			held = held[:0]
		}
	}
}

// heartbeat answers a heartbeat on raft's fast path, on the reader's
// goroutine, and returns the answer; nil if raft did not answer at once
// (it will be sent when it does).
func (s *serverConn) heartbeat(q request) []byte {
	t := s.n.group(q.group)
	if t == nil {
		return errorResponse(q.seq, fmt.Errorf("raftnet: no group %q on %s", q.group, s.n.local))
	}
	fn := t.heartbeatHandler()
	if fn == nil {
		go s.dispatch(q)
		return nil
	}
	cmd, err := decodeRequest(q.kind, q.body)
	if err != nil {
		return errorResponse(q.seq, err)
	}
	respCh := make(chan raft.RPCResponse, 1)
	fn(raft.RPC{Command: cmd, RespChan: respCh})
	select {
	case r := <-respCh:
		return response(q, r)
	default:
		go s.await(q, t, respCh)
		return nil
	}
}

// dispatch hands a request to its group's raft and sends the answer.
func (s *serverConn) dispatch(q request) {
	t := s.n.group(q.group)
	if t == nil {
		s.send(errorResponse(q.seq, fmt.Errorf("raftnet: no group %q on %s", q.group, s.n.local)))
		return
	}
	cmd, err := decodeRequest(q.kind, q.body)
	if err != nil {
		s.send(errorResponse(q.seq, err))
		return
	}
	respCh := make(chan raft.RPCResponse, 1)
	select {
	case t.consumer <- raft.RPC{Command: cmd, RespChan: respCh}:
	case <-t.done:
		s.send(errorResponse(q.seq, raft.ErrTransportShutdown))
		return
	case <-s.done:
		return
	}
	s.await(q, t, respCh)
}

func (s *serverConn) await(q request, t *Transport, respCh chan raft.RPCResponse) {
	select {
	case r := <-respCh:
		s.send(response(q, r))
	case <-t.done:
		s.send(errorResponse(q.seq, raft.ErrTransportShutdown))
	case <-s.done:
	}
}

// response encodes raft's answer to q.
func response(q request, r raft.RPCResponse) []byte {
	if r.Error != nil {
		return errorResponse(q.seq, r.Error)
	}
	b, err := appendResponse(beginResponse(getBuf(), q.seq, statusOK), q.kind, r.Response)
	if err != nil {
		putBuf(b)
		return errorResponse(q.seq, err)
	}
	return endFrame(b)
}

// call runs a Net.Handle handler.
func (s *serverConn) call(q request) {
	h := s.n.handler(q.group)
	if h == nil {
		s.send(errorResponse(q.seq, fmt.Errorf("raftnet: no method %q on %s", q.group, s.n.local)))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !q.deadline.IsZero() {
		ctx, cancel = context.WithDeadline(context.Background(), q.deadline)
	}
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	out, err := h(ctx, q.body)
	if err != nil {
		s.send(errorResponse(q.seq, err))
		return
	}
	b := beginResponse(getBuf(), q.seq, statusOK)
	s.send(endFrame(append(b, out...)))
}

// send queues answers for the writer.
func (s *serverConn) send(frames ...[]byte) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		for _, f := range frames {
			putBuf(f)
		}
		return
	}
	s.queue = append(s.queue, frames...)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *serverConn) writeLoop() {
	defer s.n.wg.Done()
	var batch [][]byte
	for {
		select {
		case <-s.kick:
		case <-s.done:
			return
		}
		s.mu.Lock()
		batch, s.queue = s.queue, batch[:0]
		s.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		if err := s.write(batch); err != nil {
			s.close()
			return
		}
		s.n.stats.servedWrites.Add(1)
		clear(batch)
	}
}

func (s *serverConn) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	queue := s.queue
	s.queue = nil
	close(s.done)
	s.mu.Unlock()
	s.conn.Close()
	for _, f := range queue {
		putBuf(f)
	}
}
