package raftnet_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/internal/rafttest"
	"github.com/quorate/quorate/transport/raftmux"
	"github.com/quorate/quorate/transport/raftnet"
)

// failsafe bounds every wait. It only turns a hang into a failure.
const failsafe = 10 * time.Second

// node is a raft port (a raftmux.Mux on loopback) with a Net on it.
type node struct {
	id   string
	addr string
	mux  *raftmux.Mux
	net  *raftnet.Net
	once sync.Once
}

func startNode(t *testing.T, id string, opts raftnet.Options) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mux := raftmux.New(ln, raftmux.Options{})
	layer, err := mux.Layer("raftnet")
	require.NoError(t, err)
	go func() { _ = mux.Serve() }()
	n := &node{id: id, addr: ln.Addr().String(), mux: mux}
	n.net = raftnet.New(layer, raft.ServerAddress(n.addr), opts)
	t.Cleanup(n.stop)
	return n
}

// stop closes the node's Net and port, as a crash would for its peers.
func (n *node) stop() {
	n.once.Do(func() {
		_ = n.net.Close()
		_ = n.mux.Close()
	})
}

type member struct {
	node *node
	raft *raft.Raft
	fsm  *rafttest.FSM
}

func raftConfig(id string) *raft.Config {
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(id)
	cfg.HeartbeatTimeout = 200 * time.Millisecond
	cfg.ElectionTimeout = 200 * time.Millisecond
	cfg.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.CommitTimeout = 50 * time.Millisecond
	cfg.Logger = hclog.NewNullLogger()
	return cfg
}

// startMember starts node n's member of group, bootstrapped with servers
// unless servers is empty.
func startMember(t *testing.T, n *node, group string, servers []raft.Server, tune func(*raft.Config)) member {
	t.Helper()
	trans, err := n.net.Transport(group)
	require.NoError(t, err)
	cfg := raftConfig(n.id)
	if tune != nil {
		tune(cfg)
	}
	store := raft.NewInmemStore()
	fsm := &rafttest.FSM{}
	r, err := raft.NewRaft(cfg, fsm, store, store, raft.NewInmemSnapshotStore(), trans)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	if len(servers) > 0 {
		require.NoError(t, r.BootstrapCluster(raft.Configuration{Servers: servers}).Error())
	}
	return member{node: n, raft: r, fsm: fsm}
}

// startCluster starts len(ids) nodes and one member of each group on each.
func startCluster(t *testing.T, ids []string, groups []string, opts raftnet.Options) ([]*node, map[string][]member) {
	t.Helper()
	nodes := make([]*node, len(ids))
	var servers []raft.Server
	for i, id := range ids {
		nodes[i] = startNode(t, id, opts)
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(nodes[i].addr)})
	}
	members := map[string][]member{}
	for _, g := range groups {
		for _, n := range nodes {
			members[g] = append(members[g], startMember(t, n, g, servers, nil))
		}
	}
	return nodes, members
}

func waitLeader(t *testing.T, ms []member) member {
	t.Helper()
	rs := make([]*raft.Raft, len(ms))
	for i, m := range ms {
		rs[i] = m.raft
	}
	return ms[rafttest.WaitLeader(t, rs...)]
}

func TestGroupsReplicateOverOneConnectionPerPeer(t *testing.T) {
	groups := []string{"0", "1", "2", "3", "meta"}
	nodes, members := startCluster(t, []string{"n1", "n2", "n3"}, groups, raftnet.Options{Tick: 20 * time.Millisecond})

	want := map[string][]string{}
	errs := make(chan error, len(groups))
	for _, g := range groups {
		leader := waitLeader(t, members[g])
		cmds := rafttest.Commands(g, 200)
		want[g] = cmds
		go func() { errs <- rafttest.ApplyAll(leader.raft, cmds) }()
	}
	for range groups {
		require.NoError(t, <-errs)
	}
	for _, g := range groups {
		for _, m := range members[g] {
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Equal(c, want[g], m.fsm.Applied())
			}, failsafe, 5*time.Millisecond, "group %s on %s", g, m.node.id)
		}
	}
	for _, n := range nodes {
		st := n.net.Stats()
		assert.LessOrEqual(t, st.Dials, uint64(2), "%s dialled each of its 2 peers once for all %d groups", n.id, len(groups))
		assert.Zero(t, st.DialFailures, n.id)
	}
}

func TestIdleHeartbeatsOfAllGroupsShareWrites(t *testing.T) {
	groups := []string{"0", "1", "2", "3", "4", "5", "6", "7"}
	nodes, members := startCluster(t, []string{"n1", "n2", "n3"}, groups, raftnet.Options{Tick: 40 * time.Millisecond})
	for _, g := range groups {
		waitLeader(t, members[g])
	}
	total := func() (req, writes, lazy uint64) {
		for _, n := range nodes {
			st := n.net.Stats()
			req, writes, lazy = req+st.Requests, writes+st.Writes, lazy+st.Lazy
		}
		return
	}
	r0, w0, l0 := total()
	require.Eventually(t, func() bool { r, _, _ := total(); return r-r0 >= 1000 }, failsafe, 10*time.Millisecond)
	r1, w1, l1 := total()
	req, writes, lazy := r1-r0, w1-w0, l1-l0
	t.Logf("idle: %d requests (%d lazy) in %d writes", req, lazy, writes)
	assert.GreaterOrEqual(t, lazy*10, req*9, "idle traffic is heartbeats and empty appends, which wait for the tick")
	assert.GreaterOrEqual(t, 2*req, 5*writes, "8 groups' heartbeats to a peer share a write")
}

func TestGroupsFailOverWhenANodeDies(t *testing.T) {
	groups := []string{"0", "1", "2"}
	nodes, members := startCluster(t, []string{"n1", "n2", "n3"}, groups, raftnet.Options{Tick: 20 * time.Millisecond, Timeout: time.Second})
	for _, g := range groups {
		waitLeader(t, members[g])
	}
	victim := waitLeader(t, members["0"]).node
	victim.stop()
	for _, g := range groups {
		var alive []member
		for _, m := range members[g] {
			if m.node != victim {
				alive = append(alive, m)
			}
		}
		require.Eventually(t, func() bool {
			for _, m := range alive {
				if m.raft.State() == raft.Leader {
					return rafttest.ApplyAll(m.raft, []string{"after-" + g}) == nil
				}
			}
			return false
		}, failsafe, 10*time.Millisecond, "group %s decides again without %s", g, victim.id)
	}
	assert.NotEmpty(t, nodes)
}

func TestAFollowerFarBehindIsSentASnapshot(t *testing.T) {
	opts := raftnet.Options{Tick: 20 * time.Millisecond}
	n1, n2, n3 := startNode(t, "n1", opts), startNode(t, "n2", opts), startNode(t, "n3", opts)
	compact := func(c *raft.Config) { c.TrailingLogs = 10; c.SnapshotThreshold = 1 << 30 }
	servers := []raft.Server{
		{Suffrage: raft.Voter, ID: "n1", Address: raft.ServerAddress(n1.addr)},
		{Suffrage: raft.Voter, ID: "n2", Address: raft.ServerAddress(n2.addr)},
	}
	ms := []member{startMember(t, n1, "g", servers, compact), startMember(t, n2, "g", servers, compact)}
	leader := waitLeader(t, ms)
	want := rafttest.Commands("s", 300)
	require.NoError(t, rafttest.ApplyAll(leader.raft, want))
	require.NoError(t, leader.raft.Snapshot().Error())

	late := startMember(t, n3, "g", nil, compact)
	require.NoError(t, leader.raft.AddVoter("n3", raft.ServerAddress(n3.addr), 0, failsafe).Error())
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want, late.fsm.Applied())
	}, failsafe, 10*time.Millisecond)
	assert.Equal(t, 1, late.fsm.Restores(), "the log before the snapshot was gone, so n3 got the snapshot")
}

func TestCallsReachTheirHandler(t *testing.T) {
	a, b := startNode(t, "a", raftnet.Options{}), startNode(t, "b", raftnet.Options{})
	b.net.Handle("echo", func(_ context.Context, body []byte) ([]byte, error) { return append([]byte("echo:"), body...), nil })
	b.net.Handle("fail", func(context.Context, []byte) ([]byte, error) { return nil, errors.New("refused: bad item") })
	b.net.Handle("deadline", func(ctx context.Context, _ []byte) ([]byte, error) {
		d, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("no deadline")
		}
		return []byte(d.UTC().Format(time.RFC3339Nano)), nil
	})
	b.net.Handle("block", func(ctx context.Context, _ []byte) ([]byte, error) { <-ctx.Done(); return nil, ctx.Err() })

	ctx := context.Background()
	out, err := a.net.Call(ctx, b.addr, "echo", []byte("hi"))
	require.NoError(t, err)
	assert.Equal(t, "echo:hi", string(out))

	_, err = a.net.Call(ctx, b.addr, "fail", nil)
	var remote *raftnet.RemoteError
	require.ErrorAs(t, err, &remote, "the handler's failure")
	assert.Equal(t, "refused: bad item", remote.Msg)
	assert.NotErrorIs(t, err, raftnet.ErrNotSent)

	_, err = a.net.Call(ctx, b.addr, "nope", nil)
	assert.ErrorContains(t, err, `no method "nope"`)

	deadline := time.Now().Add(time.Minute).Truncate(time.Microsecond)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	out, err = a.net.Call(dctx, b.addr, "deadline", nil)
	require.NoError(t, err)
	assert.Equal(t, deadline.UTC().Format(time.RFC3339Nano), string(out), "the caller's deadline travels")

	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = a.net.Call(sctx, b.addr, "block", nil)
	assert.ErrorContains(t, err, "deadline exceeded", "the caller's deadline ended the call on both ends")

	out, err = a.net.Call(ctx, b.addr, "echo", []byte("again"))
	require.NoError(t, err)
	assert.Equal(t, "echo:again", string(out), "a call that timed out while the peer was alive left the connection usable")
	assert.Equal(t, uint64(1), a.net.Stats().Dials)

	b.stop()
	_, err = a.net.Call(ctx, b.addr, "echo", nil)
	require.Error(t, err)
	_, err = a.net.Call(ctx, b.addr, "echo", nil)
	assert.ErrorIs(t, err, raftnet.ErrNotSent, "a peer that cannot be dialled was sent nothing")
}

func TestAStuckConnectionIsDroppedAndDialledAgain(t *testing.T) {
	// A peer that accepts and reads but never answers.
	addr := silentPeer(t, true)
	a := startNode(t, "a", raftnet.Options{Timeout: 150 * time.Millisecond})
	trans, err := a.net.Transport("g")
	require.NoError(t, err)
	var resp raft.RequestVoteResponse
	// The raw listener speaks no raftmux header either; the request is just
	// never answered.
	for i := 1; i <= 2; i++ {
		err = trans.RequestVote("x", raft.ServerAddress(addr), &raft.RequestVoteRequest{Term: 1}, &resp)
		assert.ErrorContains(t, err, "no answer")
		assert.Equal(t, uint64(i), a.net.Stats().Dials, "call %d dialled afresh", i)
	}
}

func TestAStreamWithoutThePreambleIsClosed(t *testing.T) {
	b := startNode(t, "b", raftnet.Options{})
	// Dial b's raftnet layer through a fresh Mux, with a wrong preamble.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	m := raftmux.New(ln, raftmux.Options{})
	defer m.Close()
	layer, err := m.Layer("raftnet")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	conn, err := layer.DialContext(ctx, "tcp", b.addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("QRN\x09M"))
	require.NoError(t, err)
	_ = conn.SetReadDeadline(time.Now().Add(failsafe))
	_, err = conn.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "a stream of another protocol version is closed")
}

// A snapshot whose data stops coming does not hold up the receiving Net's
// Close: closing it ends the stream raft is reading.
func TestAStalledSnapshotDoesNotHoldUpClose(t *testing.T) {
	a, b := startNode(t, "a", raftnet.Options{}), startNode(t, "b", raftnet.Options{})
	recv, err := b.net.Transport("g")
	require.NoError(t, err)
	reading := make(chan error, 1)
	got := make(chan struct{})
	go func() {
		rpc := <-recv.Consumer()
		close(got)
		_, err := io.Copy(io.Discard, rpc.Reader)
		reading <- err
		rpc.Respond(&raft.InstallSnapshotResponse{}, err)
	}()
	send, err := a.net.Transport("g")
	require.NoError(t, err)
	data, stall := io.Pipe() // never written: the data stalls after the request
	defer stall.Close()
	go func() {
		_ = send.InstallSnapshot("b", raft.ServerAddress(b.addr),
			&raft.InstallSnapshotRequest{Term: 1, Size: 1 << 20}, &raft.InstallSnapshotResponse{}, data)
	}()
	select {
	case <-got:
	case <-time.After(failsafe):
		require.FailNow(t, "the snapshot request never reached raft")
	}
	closed := make(chan struct{})
	go func() { b.stop(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(failsafe):
		require.FailNow(t, "the receiving Net did not close while a snapshot stalled")
	}
	select {
	case err := <-reading:
		assert.Error(t, err, "raft's read of the snapshot ended with the stream")
	case <-time.After(failsafe):
		require.FailNow(t, "raft's read of the snapshot never ended")
	}
}

// A snapshot sent to a peer that stops reading ends when the sending
// group's transport closes, not at its timeout.
func TestASnapshotToAStuckPeerEndsWithItsTransport(t *testing.T) {
	addr := silentPeer(t, false)
	a := startNode(t, "a", raftnet.Options{})
	send, err := a.net.Transport("g")
	require.NoError(t, err)
	const size = 1 << 30 // far more than the socket buffers hold
	sent := make(chan error, 1)
	go func() {
		sent <- send.InstallSnapshot("b", raft.ServerAddress(addr),
			&raft.InstallSnapshotRequest{Term: 1, Size: size}, &raft.InstallSnapshotResponse{}, io.LimitReader(zeros{}, size))
	}()
	select {
	case err := <-sent:
		require.FailNow(t, "the send ended before its transport closed", "%v", err)
	case <-time.After(100 * time.Millisecond): // bounded wait for the send to block, not a clock
	}
	require.NoError(t, send.Close())
	select {
	case err := <-sent:
		assert.Error(t, err)
	case <-time.After(failsafe):
		require.FailNow(t, "the sender's InstallSnapshot outlived its transport")
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// silentPeer listens on loopback and accepts connections it never answers:
// it reads and discards what they carry if read is set, and otherwise
// leaves it unread, so the sender's writes block once the buffers fill.
func silentPeer(t *testing.T, read bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if read {
				go func() { _, _ = io.Copy(io.Discard, c) }()
			}
		}
	}()
	return ln.Addr().String()
}

// forgedEntries starts a one-voter group on a node whose transport treats
// heartbeats as localTerm says (nil: as raftgroup sets it, raft's own
// current term), has another node send it a heartbeat of the next term,
// proposes one entry at once, and returns the entries of its log whose
// term it never led: entries a leader stamped with someone else's term.
func forgedEntries(t *testing.T, localTerm func(*raft.Raft) func() uint64) []raft.Log {
	a := startNode(t, "a", raftnet.Options{Tick: time.Millisecond})
	b := startNode(t, "b", raftnet.Options{Tick: time.Millisecond})
	trans, err := a.net.Transport("g")
	require.NoError(t, err)
	store := raft.NewInmemStore()
	r, err := raft.NewRaft(raftConfig("a"), &rafttest.FSM{}, store, store, raft.NewInmemSnapshotStore(), trans)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	require.NoError(t, r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: raft.ServerAddress(a.addr)}}}).Error())
	rafttest.WaitLeader(t, r)
	require.NoError(t, r.Barrier(failsafe).Error())
	if localTerm == nil {
		localTerm = func(r *raft.Raft) func() uint64 { return r.CurrentTerm }
	}
	trans.SetLocalTerm(localTerm(r))
	led := r.CurrentTerm()

	// A leader elected elsewhere in the next term, as a paused leader's
	// peers elect one, sends its first heartbeat; the deposed leader has
	// a proposal waiting.
	tb, err := b.net.Transport("g")
	require.NoError(t, err)
	var resp raft.AppendEntriesResponse
	require.NoError(t, tb.AppendEntries("a", raft.ServerAddress(a.addr), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("b"), Addr: []byte(b.addr)},
		Term:      led + 1,
	}, &resp))
	_ = r.Apply([]byte("proposed as the heartbeat came"), failsafe).Error() // refused or lost: either is right

	last, err := store.LastIndex()
	require.NoError(t, err)
	var forged []raft.Log
	for i := uint64(1); i <= last; i++ {
		var l raft.Log
		require.NoError(t, store.GetLog(i, &l))
		if l.Term > led {
			forged = append(forged, l)
		}
	}
	return forged
}

// A deposed leader must not stamp its own entries with its successor's
// term. hashicorp/raft v1.8.0 does when the successor's first heartbeat
// raises its term on the fast path (the transport's goroutine) while its
// main loop, still leading, takes a proposal: raft then takes that entry
// for the successor's entry of the same index and term and never replaces
// it, and the replica's state parts from the others' (jepsen/findings/
// 2026-12-07-crash-930005). raftnet sends such a heartbeat to the main
// loop instead (Transport.SetLocalTerm).
func TestADeposedLeaderNeverStampsItsSuccessorsTerm(t *testing.T) {
	t.Run("every heartbeat on the fast path, as before the fix", func(t *testing.T) {
		forged := forgedEntries(t, func(*raft.Raft) func() uint64 { return func() uint64 { return ^uint64(0) } })
		require.NotEmpty(t, forged, "the race this test is about did not happen; the fast path no longer raises the term?")
		assert.Equal(t, []byte("proposed as the heartbeat came"), forged[0].Data)
	})
	t.Run("a newer term's heartbeat through the main loop", func(t *testing.T) {
		assert.Empty(t, forgedEntries(t, nil))
	})
}
