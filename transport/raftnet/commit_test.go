package raftnet

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/internal/rafttest"
)

// A follower holding a deposed leader's uncommitted tail (entries 6 and 7
// of term 2) gets an append from the new leader (term 3) that checks only
// up to entry 5 but says the leader has committed up to 7. raft v1.8.0
// alone commits up to its own last entry and applies the stale tail; over
// raftnet the commit stops at 5, and the leader's next append, which
// replaces 6 and 7, is what gets applied.
func TestAFollowerAppliesOnlyEntriesTheLeaderChecked(t *testing.T) {
	fnet, faddr := newTestNet(t, Options{})
	t.Cleanup(func() { _ = fnet.Close() })
	lnet, laddr := newTestNet(t, Options{})
	t.Cleanup(func() { _ = lnet.Close() })
	ftr, err := fnet.Transport("g")
	require.NoError(t, err)
	ltr, err := lnet.Transport("g")
	require.NoError(t, err)

	store := raft.NewInmemStore()
	snaps := raft.NewInmemSnapshotStore()
	conf := raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: "f", Address: raft.ServerAddress(faddr)},
		{Suffrage: raft.Voter, ID: "l", Address: raft.ServerAddress(laddr)},
	}}
	cfg := raft.DefaultConfig()
	cfg.LocalID = "f"
	cfg.Logger = hclog.NewNullLogger()
	// Long enough that the follower never stands for election in this test.
	cfg.HeartbeatTimeout = rafttest.Failsafe
	cfg.ElectionTimeout = rafttest.Failsafe
	cfg.LeaderLeaseTimeout = rafttest.Failsafe
	require.NoError(t, raft.BootstrapCluster(cfg, store, store, snaps, ftr, conf))
	var tail []*raft.Log
	for i := uint64(2); i <= 7; i++ {
		term, data := uint64(1), fmt.Sprintf("t1-%d", i)
		if i > 5 {
			term, data = 2, fmt.Sprintf("stale-%d", i)
		}
		tail = append(tail, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(data)})
	}
	require.NoError(t, store.StoreLogs(tail))
	fsm := &rafttest.FSM{}
	r, err := raft.NewRaft(cfg, fsm, store, store, snaps, ftr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Shutdown().Error() })

	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("l"), Addr: []byte(laddr)}
	send := func(req *raft.AppendEntriesRequest) {
		t.Helper()
		var resp raft.AppendEntriesResponse
		require.NoError(t, ltr.AppendEntries("f", raft.ServerAddress(faddr), req, &resp))
		require.True(t, resp.Success, "the follower refused %+v", req)
	}
	send(&raft.AppendEntriesRequest{RPCHeader: header, Term: 3, PrevLogEntry: 5, PrevLogTerm: 1, LeaderCommitIndex: 7})
	send(&raft.AppendEntriesRequest{RPCHeader: header, Term: 3, PrevLogEntry: 5, PrevLogTerm: 1, LeaderCommitIndex: 7,
		Entries: []*raft.Log{
			{Index: 6, Term: 3, Type: raft.LogCommand, Data: []byte("t3-6")},
			{Index: 7, Term: 3, Type: raft.LogCommand, Data: []byte("t3-7")},
		}})
	// raft's AppliedIndex moves when entries are handed to the FSM, before
	// the FSM has run them, so wait for the FSM itself.
	require.Eventually(t, func() bool { return len(fsm.Applied()) >= 6 }, rafttest.Failsafe, time.Millisecond)
	assert.Equal(t, []string{"t1-2", "t1-3", "t1-4", "t1-5", "t3-6", "t3-7"}, fsm.Applied())
	assert.Equal(t, uint64(1), fnet.Stats().CommitCapped, "only the first append asked past its entries")
}

// A group's raft requests on one stream reach raft in the order they were
// written, as raft's NetworkTransport serves them.
func TestAGroupsRequestsReachRaftInOrder(t *testing.T) {
	b, baddr := newTestNet(t, Options{})
	t.Cleanup(func() { _ = b.Close() })
	tr, err := b.Transport("g")
	require.NoError(t, err)
	const n = 32
	got := make(chan uint64, n)
	go func() {
		for rpc := range tr.Consumer() {
			got <- rpc.Command.(*raft.AppendEntriesRequest).PrevLogEntry
			rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		}
	}()
	conn, err := net.Dial("tcp", baddr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	out := preamble(streamMux)
	for i := uint64(1); i <= n; i++ {
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte("a")}, Term: 1, PrevLogEntry: i, PrevLogTerm: 1}
		out = append(out, endFrame(appendAppendEntriesRequest(beginRequest(nil, kindAppendEntries, i, "g", time.Time{}), req))...)
	}
	_, err = conn.Write(out) // all in one write: the reader has every frame at once
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(rafttest.Failsafe))
	for range n {
		f, err := readFrame(br, nil, 1<<20)
		require.NoError(t, err)
		_, status, _, err := parseResponse(f)
		require.NoError(t, err)
		require.Equal(t, statusOK, status)
	}
	order := make([]uint64, 0, n)
	for range n {
		order = append(order, <-got)
	}
	want := make([]uint64, 0, n)
	for i := uint64(1); i <= n; i++ {
		want = append(want, i)
	}
	assert.Equal(t, want, order)
}
