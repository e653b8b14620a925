package raftnet

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"runtime"
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

// serverConn is an accepted 'M' stream: its reader hands each group's raft
// requests to that group's workers (one for heartbeats, one for the rest)
// and calls to a goroutine each; its writer sends the answers, several per
// write when they are ready together.
type serverConn struct {
	n    *Net
	conn net.Conn
	kick chan struct{}
	done chan struct{}

	mu     sync.Mutex
	queue  [][]byte
	closed bool
}

// lane is one group's requests of one sort on one stream; a lane's worker
// hands them to raft one after another, in the order they arrived. Raft's
// own NetworkTransport serves a connection's requests in order, and raft
// relies on it: the requests a leader sends a follower are built from its
// state when each is sent, and a follower that took a later one before an
// earlier one would act on the older view last. Heartbeats have a lane of
// their own so that they are never held up behind an append being stored.
type lane struct {
	group string
	beats bool
}

func (s *serverConn) readLoop(br *bufio.Reader) {
	defer s.close()
	lanes := map[lane]chan request{}
	for {
		b, err := readFrame(br, nil, s.n.opts.MaxFrame)
		if err != nil {
			return
		}
		q, err := parseRequest(b)
		if err != nil {
			if q.seq != 0 {
				// The frame was whole, only its fields are wrong: refuse
				// this request, keep the stream.
				s.send(errorResponse(q.seq, err))
				continue
			}
			s.n.logger.Warn("raftnet: bad request frame; closing the stream", "remote", s.conn.RemoteAddr(), "err", err)
			return
		}
		s.n.stats.served.Add(1)
		if q.kind == kindCall {
			go s.call(q)
			continue
		}
		s.enqueue(lanes, q)
	}
}

// laneBacklog bounds the requests of one lane waiting for its worker; beyond
// it a request is refused (raft backs off and retries). A leader has one
// AppendEntries at a time in flight to each follower (raftnet does not
// pipeline) and one heartbeat, so a full lane is a peer sending far faster
// than its group's raft answers.
const laneBacklog = 64

// enqueue hands q to its lane's worker, started on first use. The reader
// never runs raft code itself: raft's handlers may write to the stable
// store (a new term) or the log, and a reader blocked there would hold up
// every other group's traffic from this peer.
func (s *serverConn) enqueue(lanes map[lane]chan request, q request) {
	l := lane{group: q.group, beats: q.kind == kindHeartbeat}
	ch, ok := lanes[l]
	if !ok {
		ch = make(chan request, laneBacklog)
		lanes[l] = ch
		go s.serveLane(ch, l.beats)
	}
	select {
	case ch <- q:
	default:
		s.send(errorResponse(q.seq, fmt.Errorf("raftnet: group %q on %s: %d requests waiting", q.group, s.n.local, laneBacklog)))
	}
}

// serveLane answers one lane's requests in order until the stream closes;
// requests still waiting then are dropped with the stream, whose caller
// has already seen it fail.
func (s *serverConn) serveLane(ch <-chan request, beats bool) {
	for {
		select {
		case q := <-ch:
			if beats {
				s.answerHeartbeat(q)
			} else {
				s.dispatch(q)
			}
		case <-s.done:
			return
		}
	}
}

func (s *serverConn) answerHeartbeat(q request) {
	t, cmd, ok := s.resolve(q)
	if !ok {
		return
	}
	fn, term := t.heartbeatHandler()
	if ae, isAE := cmd.(*raft.AppendEntriesRequest); fn == nil || term == nil || !isAE || !isHeartbeat(ae) || ae.Term > term() {
		// No fast path yet, not a heartbeat whatever the sender said, or
		// one of a newer term (see Transport.SetLocalTerm): raft's main
		// loop decides.
		s.toRaft(q, t, cmd)
		return
	}
	respCh := make(chan raft.RPCResponse, 1)
	fn(raft.RPC{Command: cmd, RespChan: respCh})
	s.await(q, t, respCh)
}

// dispatch hands a request to its group's raft and sends the answer.
func (s *serverConn) dispatch(q request) {
	if t, cmd, ok := s.resolve(q); ok {
		s.toRaft(q, t, cmd)
	}
}

// resolve finds q's group and decodes its command, an append's commit index
// capped (capCommit); if either fails, it answers q with the error and
// returns false.
func (s *serverConn) resolve(q request) (*Transport, any, bool) {
	t := s.n.group(q.group)
	if t == nil {
		s.send(errorResponse(q.seq, fmt.Errorf("raftnet: no group %q on %s", q.group, s.n.local)))
		return nil, nil, false
	}
	cmd, err := decodeRequest(q.kind, q.body)
	if err != nil {
		s.send(errorResponse(q.seq, err))
		return nil, nil, false
	}
	if ae, isAE := cmd.(*raft.AppendEntriesRequest); isAE {
		asked := ae.LeaderCommitIndex
		if capCommit(ae) {
			s.n.stats.commitCapped.Add(1)
			s.n.logger.Debug("raftnet: capped an append's commit index at its last entry",
				"group", q.group, "remote", s.conn.RemoteAddr(), "asked", asked, "capped", ae.LeaderCommitIndex)
		}
	}
	return t, cmd, true
}

// toRaft hands cmd to t's raft main loop and sends its answer.
func (s *serverConn) toRaft(q request, t *Transport, cmd any) {
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
	bw := bufio.NewWriterSize(s.conn, 64<<10)
	var batch [][]byte
	for {
		select {
		case <-s.kick:
		case <-s.done:
			return
		}
		// Let answers being produced at this moment (heartbeats of other
		// groups that arrived in the same read) join this write.
		runtime.Gosched()
		s.mu.Lock()
		batch, s.queue = s.queue, batch[:0]
		s.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		if err := writeBatch(s.conn, bw, batch, s.n.opts.Timeout); err != nil {
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
