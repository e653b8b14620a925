package raftnet

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/internal/binenc"
)

// Transport is one group's raft transport over its Net.
type Transport struct {
	net      *Net
	group    string
	consumer chan raft.RPC
	done     chan struct{}
	once     sync.Once
	hurry    atomic.Int64 // Unix ns until which requests are urgent

	hbMu sync.Mutex
	hb   func(raft.RPC)
	term func() uint64 // the group's raft's current term (SetLocalTerm)
}

var (
	_ raft.Transport   = (*Transport)(nil)
	_ raft.WithClose   = (*Transport)(nil)
	_ raft.WithPreVote = (*Transport)(nil)
)

func newTransport(n *Net, group string) *Transport {
	return &Transport{net: n, group: group, consumer: make(chan raft.RPC), done: make(chan struct{})}
}

// Consumer implements raft.Transport.
func (t *Transport) Consumer() <-chan raft.RPC { return t.consumer }

// LocalAddr implements raft.Transport.
func (t *Transport) LocalAddr() raft.ServerAddress { return t.net.local }

// AppendEntriesPipeline implements raft.Transport: replication is not
// pipelined. hashicorp/raft v1.8.0's pipeline can deadlock when a follower
// answers an AppendEntries with Success=false: the sender parks on a full
// in-progress channel while the decoder parks on a done channel nobody
// reads, so the follower silently stops receiving entries and Shutdown
// never returns (quorate's 5-node tests hit it with raft's own transport).
// Without a pipeline raft replicates one AppendEntries at a time per
// follower, and the group commit makes each one a large batch.
func (t *Transport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// Hurry makes the group's requests urgent for d: they no longer wait for the
// tick, and those already waiting go at once. Call it before
// raft.VerifyLeader, whose heartbeats a caller waits for (raft's heartbeat
// loop may be waiting inside a lazy AppendEntries when the verify begins).
func (t *Transport) Hurry(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := t.hurry.Load()
		if cur >= until || t.hurry.CompareAndSwap(cur, until) {
			break
		}
	}
	if t.net != nil {
		t.net.hurry(t.group)
	}
}

func (t *Transport) lazy(entries int) bool {
	return entries == 0 && time.Now().UnixNano() > t.hurry.Load()
}

// isHeartbeat reports whether raft's receiving side treats req as a
// heartbeat (the same test as raft's NetworkTransport).
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	leader := req.Addr
	if len(leader) == 0 {
		//lint:ignore SA1019 raft v1.8.0 still fills the deprecated field; a transport must carry every field
		leader = req.Leader
	}
	return req.Term != 0 && leader != nil && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

// AppendEntries implements raft.Transport.
func (t *Transport) AppendEntries(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	k := kindAppendEntries
	if isHeartbeat(args) {
		k = kindHeartbeat
	}
	return t.call(target, k, t.lazy(len(args.Entries)),
		func(b []byte) []byte { return appendAppendEntriesRequest(b, args) },
		func(r *binenc.Reader) { readAppendEntriesResponse(r, resp) })
}

// RequestVote implements raft.Transport.
func (t *Transport) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.call(target, kindRequestVote, false,
		func(b []byte) []byte { return appendRequestVoteRequest(b, args) },
		func(r *binenc.Reader) { readRequestVoteResponse(r, resp) })
}

// RequestPreVote implements raft.WithPreVote.
func (t *Transport) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.call(target, kindRequestPreVote, false,
		func(b []byte) []byte { return appendRequestPreVoteRequest(b, args) },
		func(r *binenc.Reader) { readRequestPreVoteResponse(r, resp) })
}

// TimeoutNow implements raft.Transport.
func (t *Transport) TimeoutNow(_ raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.call(target, kindTimeoutNow, false,
		func(b []byte) []byte { return appendTimeoutNowRequest(b, args) },
		func(r *binenc.Reader) { readTimeoutNowResponse(r, resp) })
}

func (t *Transport) call(target raft.ServerAddress, k kind, lazy bool, encode func([]byte) []byte, decode func(*binenc.Reader)) error {
	select {
	case <-t.done:
		return raft.ErrTransportShutdown
	default:
	}
	p, err := t.net.peer(string(target))
	if err != nil {
		return err
	}
	return p.call(context.Background(), t.done, k, t.group, time.Time{}, lazy, encode, func(body []byte) error {
		r := &binenc.Reader{B: body}
		decode(r)
		return finish(r)
	})
}

// EncodePeer implements raft.Transport.
func (t *Transport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte { return []byte(addr) }

// DecodePeer implements raft.Transport.
func (t *Transport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// SetHeartbeatHandler implements raft.Transport.
func (t *Transport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	t.hb = cb
}

// heartbeatHandler returns raft's fast path and the local term to judge
// heartbeats by (see SetLocalTerm), in one look.
func (t *Transport) heartbeatHandler() (func(raft.RPC), func() uint64) {
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	return t.hb, t.term
}

// SetLocalTerm gives the transport its group's raft's current term
// (raft.Raft.CurrentTerm), so that only a heartbeat that cannot change it
// takes raft's fast path; until it is set, every heartbeat goes to raft's
// main loop.
//
// hashicorp/raft v1.8.0 answers a heartbeat on the transport's goroutine,
// and a heartbeat of a newer term makes it a follower of that term there,
// while its main loop goes on. A leader that has been deposed without
// knowing it (paused, or cut off, past an election) and is appending
// proposals at that moment stamps them with the term it reads then: the
// new leader's. Its log then holds its own entries under the new leader's
// term, at indexes where the new leader has others, and raft, which takes
// an entry of the same index and term for the same entry, never replaces
// them: that replica applies them as committed, and its state machine
// parts from the others' for good (the fault suite saw a replica spend a
// token no other replica spent, and answer from that state once it led).
// A heartbeat of a newer term goes to the main loop, where a term change
// and an append cannot interleave; heartbeats of the term raft already
// has, all but the first of each term, still take the fast path.
func (t *Transport) SetLocalTerm(term func() uint64) {
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	t.term = term
}

// Close implements raft.WithClose: the group's requests in flight, in and
// out, fail, and its name is free again.
func (t *Transport) Close() error {
	t.once.Do(func() {
		close(t.done)
		t.net.unregister(t)
	})
	return nil
}
