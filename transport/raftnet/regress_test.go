package raftnet

// Regression tests from a review of this package: each failed before its
// fix (heartbeats off the reader, stall detection for every caller, Hurry
// promoting queued requests, bad calls refused alone, queued requests
// reported as not sent).

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tcpLayer is a plain-TCP Layer.
type tcpLayer struct{ net.Listener }

func (tcpLayer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func newTestNet(t *testing.T, opts Options) (*Net, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	n := New(tcpLayer{ln}, raft.ServerAddress(ln.Addr().String()), opts)
	return n, ln.Addr().String()
}

func hb() *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte("a")}, Term: 1}
}

// answerHeartbeats makes group g on n answer every heartbeat at once (fn may
// block first).
func answerHeartbeats(t *testing.T, n *Net, g string, before func()) *Transport {
	tr, err := n.Transport(g)
	require.NoError(t, err)
	tr.SetLocalTerm(func() uint64 { return 1 }) // the heartbeats' term
	tr.SetHeartbeatHandler(func(rpc raft.RPC) {
		if before != nil {
			before()
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
	})
	go func() {
		for rpc := range tr.Consumer() {
			switch rpc.Command.(type) {
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{Term: 1}, nil)
			default:
				rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
			}
		}
	}()
	return tr
}

// heartbeatPair starts two Nets with the given tick, the second answering
// group "g" at once, and returns the first's transport for "g" and the
// second's address.
func heartbeatPair(t *testing.T, tick time.Duration) (*Transport, string) {
	t.Helper()
	a, _ := newTestNet(t, Options{Tick: tick})
	t.Cleanup(func() { _ = a.Close() })
	b, baddr := newTestNet(t, Options{Tick: tick})
	t.Cleanup(func() { _ = b.Close() })
	answerHeartbeats(t, b, "g", nil)
	ta, err := a.Transport("g")
	require.NoError(t, err)
	return ta, baddr
}

// 1. Hurry does not speed up a lazy request already queued: VerifyLeader's
// heartbeat, if raft's heartbeat goroutine is already waiting in a lazy
// call, still waits for the tick.
func TestHurrySendsAQueuedLazyRequestAtOnce(t *testing.T) {
	const tick = 2 * time.Second
	ta, baddr := heartbeatPair(t, tick)
	// warm the connection
	ta.Hurry(time.Second)
	require.NoError(t, ta.RequestVote("b", raft.ServerAddress(baddr), &raft.RequestVoteRequest{Term: 1}, &raft.RequestVoteResponse{}))
	ta.hurry.Store(0)
	// start just after a tick boundary
	now := time.Now()
	time.Sleep(now.Truncate(tick).Add(tick + 20*time.Millisecond).Sub(now))
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- ta.AppendEntries("b", raft.ServerAddress(baddr), hb(), &raft.AppendEntriesResponse{}) }()
	time.Sleep(50 * time.Millisecond)
	ta.Hurry(time.Second) // VerifyRead
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(500 * time.Millisecond):
		t.Errorf("heartbeat queued before Hurry still waits for the tick (%v so far)", time.Since(start))
		<-done
	}
}

// 2. One group's heartbeat handler that blocks (an fsync of a new term, or
// raftlog.Store's select{} after Close) blocks the shared reader: every
// other group's requests from that peer go unanswered, and Net.Close hangs.
func TestABlockedHeartbeatHandlerHoldsUpNoOtherGroup(t *testing.T) {
	a, _ := newTestNet(t, Options{Tick: time.Millisecond, Timeout: time.Second})
	defer a.Close()
	b, baddr := newTestNet(t, Options{Tick: time.Millisecond})
	release := make(chan struct{})
	var once sync.Once
	answerHeartbeats(t, b, "slow", func() { once.Do(func() { <-release }) })
	answerHeartbeats(t, b, "fast", nil)
	slow, err := a.Transport("slow")
	require.NoError(t, err)
	fast, err := a.Transport("fast")
	require.NoError(t, err)
	slow.Hurry(time.Minute)
	go func() { _ = slow.AppendEntries("b", raft.ServerAddress(baddr), hb(), &raft.AppendEntriesResponse{}) }()
	time.Sleep(100 * time.Millisecond)
	err = fast.RequestVote("b", raft.ServerAddress(baddr), &raft.RequestVoteRequest{Term: 1}, &raft.RequestVoteResponse{})
	assert.NoError(t, err, "group fast is held up by group slow's heartbeat handler")

	closed := make(chan struct{})
	go func() { _ = b.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Second):
		t.Error("Net.Close hangs while a heartbeat handler blocks")
	}
	close(release)
	<-closed
}

// 3. A heartbeat's answer is held while the reader's buffer ends inside a
// frame: under a continuous stream of appends it can wait indefinitely.
func TestAHeartbeatIsAnsweredWhileAFrameIsHalfRead(t *testing.T) {
	b, baddr := newTestNet(t, Options{})
	defer b.Close()
	answerHeartbeats(t, b, "g", nil)
	conn, err := net.Dial("tcp", baddr)
	require.NoError(t, err)
	defer conn.Close()
	f := endFrame(appendAppendEntriesRequest(beginRequest(nil, kindHeartbeat, 1, "g", time.Time{}), hb()))
	big := endFrame(append(beginRequest(nil, kindAppendEntries, 2, "g", time.Time{}), make([]byte, 1000)...))
	out := append(preamble(streamMux), f...)
	out = append(out, big[:100]...) // the rest of the append is still on its way
	_, err = conn.Write(out)
	require.NoError(t, err)
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err = readFrame(bufio.NewReader(conn), nil, 1<<20)
	assert.NoError(t, err, "the heartbeat's answer waits for an unrelated frame to finish arriving")
}

// 4. A call whose ctx deadline is shorter than Options.Timeout never
// triggers the stuck-connection check: a silently dead connection is kept
// forever (forwarded decisions fail as outcome-unknown, and never redial).
func TestAStuckConnectionIsDroppedByCallersWithShortDeadlines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = bufio.NewReader(c).WriteTo(discard{}) }()
		}
	}()
	a, _ := newTestNet(t, Options{Timeout: 200 * time.Millisecond})
	defer a.Close()
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := a.Call(ctx, ln.Addr().String(), "m", nil)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	assert.Greater(t, a.Stats().Dials, uint64(1), "500 ms of unanswered calls on one connection, never dropped")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// 5. A Call with a method name over 255 bytes is written, and the peer
// closes the whole shared stream: every group's call in flight fails.
func TestABadCallDoesNotBreakTheSharedConnection(t *testing.T) {
	a, _ := newTestNet(t, Options{})
	defer a.Close()
	b, baddr := newTestNet(t, Options{})
	defer b.Close()
	b.Handle("block", func(ctx context.Context, _ []byte) ([]byte, error) {
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
		return []byte("ok"), nil
	})
	errc := make(chan error, 1)
	go func() {
		_, err := a.Call(context.Background(), baddr, "block", nil)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_, err := a.Call(context.Background(), baddr, strings.Repeat("x", 300), nil)
	require.Error(t, err)
	assert.NoError(t, <-errc, "an unrelated call in flight failed: %v", err)
}

// 6. A request still in the writer's queue when the connection fails was
// provably never sent, yet is reported as outcome-unknown (safe, but the
// forwarder then answers ErrOutcomeUnknown instead of retrying).
func TestRequestsQueuedWhenTheConnectionBreaksWereNotSent(t *testing.T) {
	a, _ := newTestNet(t, Options{Tick: time.Hour})
	defer a.Close()
	b, baddr := newTestNet(t, Options{})
	defer b.Close()
	answerHeartbeats(t, b, "g", nil)
	ta, err := a.Transport("g")
	require.NoError(t, err)
	ta.Hurry(time.Second)
	require.NoError(t, ta.RequestVote("b", raft.ServerAddress(baddr), &raft.RequestVoteRequest{Term: 1}, &raft.RequestVoteResponse{}))
	ta.hurry.Store(0)
	errc := make(chan error, 1)
	go func() { errc <- ta.AppendEntries("b", raft.ServerAddress(baddr), hb(), &raft.AppendEntriesResponse{}) }()
	time.Sleep(50 * time.Millisecond) // queued, waiting for the hour's tick
	p, _ := a.peer(baddr)
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	c.fail(errors.New("simulated break"))
	assert.ErrorIs(t, <-errc, ErrNotSent)
}

// 7. The exported "urgent" count was Requests-Lazy, but Lazy counts a
// request when it is queued and Requests when it is written: a heartbeat
// waiting for the tick made the urgent counter fall, which Prometheus reads
// as a restart. Each kind is now counted on its own, when it is queued.
func TestRequestCountsNeverFallWhileARequestWaitsForTheTick(t *testing.T) {
	ta, baddr := heartbeatPair(t, time.Hour) // the lazy request below waits until Hurry
	a := ta.net
	require.NoError(t, ta.RequestVote("b", raft.ServerAddress(baddr), &raft.RequestVoteRequest{Term: 1}, &raft.RequestVoteResponse{}))
	// The writer counts a write after it returns, which may be after the
	// answer came back.
	require.Eventually(t, func() bool { return a.Stats().Requests == 1 }, 5*time.Second, time.Millisecond)
	before := a.Stats()
	require.Equal(t, uint64(1), before.Urgent)
	require.Equal(t, uint64(1), before.DialsOK)

	done := make(chan error, 1)
	go func() { done <- ta.AppendEntries("b", raft.ServerAddress(baddr), hb(), &raft.AppendEntriesResponse{}) }()
	require.Eventually(t, func() bool { return a.Stats().Lazy == 1 }, 5*time.Second, time.Millisecond)
	queued := a.Stats()
	assert.Equal(t, before.Urgent, queued.Urgent, "a lazy request queued takes nothing from the urgent count")
	assert.Equal(t, before.Requests, queued.Requests, "not written yet")

	ta.Hurry(time.Second)
	require.NoError(t, <-done)
	require.Eventually(t, func() bool { return a.Stats().Requests == 2 }, 5*time.Second, time.Millisecond)
	after := a.Stats()
	assert.Equal(t, uint64(1), after.Urgent, "it was queued lazy, and is counted so")
	assert.Equal(t, uint64(1), after.Dials)
	assert.Zero(t, after.DialFailures)
}

// A heartbeat of a newer term than the local raft's goes to raft's main
// loop, not the fast path: on the fast path it changes the term while a
// deposed leader's main loop may be appending, and that leader then
// stamps its own entries with the new leader's term (see
// Transport.SetLocalTerm). Heartbeats of the local term, and of older
// ones, still take the fast path; without a term to compare with, none
// does.
func TestHeartbeatOfANewerTermGoesToTheMainLoop(t *testing.T) {
	a, _ := newTestNet(t, Options{Tick: time.Millisecond})
	t.Cleanup(func() { _ = a.Close() })
	b, baddr := newTestNet(t, Options{Tick: time.Millisecond})
	t.Cleanup(func() { _ = b.Close() })
	tb, err := b.Transport("g")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		paths []string
	)
	took := func(path string) {
		mu.Lock()
		paths = append(paths, path)
		mu.Unlock()
	}
	tb.SetHeartbeatHandler(func(rpc raft.RPC) {
		took("fast")
		rpc.Respond(&raft.AppendEntriesResponse{Term: 5, Success: true}, nil)
	})
	go func() {
		for rpc := range tb.Consumer() {
			took("main")
			rpc.Respond(&raft.AppendEntriesResponse{Term: 5, Success: true}, nil)
		}
	}()
	ta, err := a.Transport("g")
	require.NoError(t, err)
	beat := func(term uint64) string {
		t.Helper()
		req := hb()
		req.Term = term
		require.NoError(t, ta.AppendEntries("b", raft.ServerAddress(baddr), req, &raft.AppendEntriesResponse{}))
		mu.Lock()
		defer mu.Unlock()
		return paths[len(paths)-1]
	}

	assert.Equal(t, "main", beat(5), "no local term known yet: the main loop decides")
	tb.SetLocalTerm(func() uint64 { return 5 })
	assert.Equal(t, "fast", beat(5), "a heartbeat of the local term")
	assert.Equal(t, "fast", beat(4), "a heartbeat of an older term (raft refuses it)")
	assert.Equal(t, "main", beat(6), "a heartbeat of a newer term changes the term: the main loop's")
}
