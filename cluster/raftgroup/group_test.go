package raftgroup

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/logbuf"
	"github.com/quorate/quorate/raftlog"
)

// openTestGroup starts a data group whose only voter is this node, on raft's
// in-memory transport and a bolt store in a temporary directory, and waits
// until it serves.
func openTestGroup(t *testing.T) *Group {
	t.Helper()
	return openTestGroupLogging(t, "0", slog.New(slog.DiscardHandler), slog.LevelError)
}

// openTestGroupLogging is openTestGroup of group id, logging to logger
// from level on.
func openTestGroupLogging(t *testing.T, id string, logger *slog.Logger, level slog.Level) *Group {
	t.Helper()
	dir := t.TempDir()
	var bolt raftlog.Bolt
	store, err := bolt.Open(filepath.Join(dir, "raft.db"))
	require.NoError(t, err)
	addr, trans := raft.NewInmemTransport("")
	g, err := Open(Config{ID: id, Bootstrap: true, Dir: dir, Store: store, NodeID: "n1", Addr: addr, Trans: trans,
		Timings: LoopbackTimings, Logger: logger, LogLevel: level})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	require.Eventually(t, g.Serving, 10*time.Second, 5*time.Millisecond, "the group never served")
	return g
}

// Reads answer only in a term whose barrier the leader applied: a group
// still marked serving from an earlier term (raft's LeaderCh can drop a
// lose-then-regain) refuses with ErrNotLeader, which the caller retries
// (Node.atLeader, until its deadline), until the barrier of the current term
// is applied.
func TestReadsNeedTheCurrentTermsBarrier(t *testing.T) {
	g := openTestGroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := g.ApplyLocal(ctx, fsm.SetTier{Client: "rita", Tier: "pro"})
	require.NoError(t, err)
	term := g.barrierTerm.Load()
	require.Equal(t, g.Raft.CurrentTerm(), term)

	g.barrierTerm.Store(term - 1) // as if the barrier applied were an earlier term's
	assert.ErrorIs(t, g.VerifyRead(ctx), errs.ErrNotLeader, "no read from a term without its barrier")

	g.barrierTerm.Store(term)
	require.NoError(t, g.VerifyRead(ctx))
	assert.Equal(t, "pro", g.FSM.View("rita", 0).AssignedTier)
}

// raft's own log lines name their group: a node runs one raft per group,
// and a line without the group cannot be told apart (the fault suite's
// logs needed it).
func TestRaftsLogLinesNameTheGroup(t *testing.T) {
	var logs logbuf.Buffer
	openTestGroupLogging(t, "7", slog.New(slog.NewTextHandler(&logs, nil)), slog.LevelInfo)
	line, ok := logs.LineWith("component=raft", "entering leader state")
	require.True(t, ok, "raft logged its election:\n%s", logs.String())
	assert.Contains(t, line, "group=7")
}
