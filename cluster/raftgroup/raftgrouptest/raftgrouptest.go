// Package raftgrouptest starts real raft groups for the tests of the
// packages built on raftgroup: a group whose only voter is this node, on
// raft's in-memory transport and a bolt log in a temporary directory.
package raftgrouptest

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/raftlog"
)

// Single starts group id (at index) with node n1 as its only voter, waits
// until it serves, and closes it when the test ends.
func Single(t testing.TB, id string, index int) *raftgroup.Group {
	t.Helper()
	g := open(t, id, index, true)
	require.Eventually(t, g.Serving, 10*time.Second, 5*time.Millisecond, "group %s never served", id)
	return g
}

// Waiting starts group id (at index) on node n1 without bootstrapping it:
// a replica waiting to be added, which knows no leader.
func Waiting(t testing.TB, id string, index int) *raftgroup.Group {
	t.Helper()
	return open(t, id, index, false)
}

func open(t testing.TB, id string, index int, bootstrap bool) *raftgroup.Group {
	t.Helper()
	addr, trans := raft.NewInmemTransport("")
	return Open(t, raftgroup.Config{ID: id, Index: index, Bootstrap: bootstrap, NodeID: "n1", Addr: addr, Trans: trans})
}

// Open opens the group c describes on a bolt log in a temporary directory,
// with loopback timings and a silent logger unless c sets them, and closes
// it when the test ends: for tests whose groups span nodes (c's own
// transport), or that need a group's logs.
func Open(t testing.TB, c raftgroup.Config) *raftgroup.Group {
	t.Helper()
	c.Dir = t.TempDir()
	var bolt raftlog.Bolt
	store, err := bolt.Open(filepath.Join(c.Dir, "raft.db"))
	require.NoError(t, err)
	c.Store = store
	if c.Timings == (raftgroup.Timings{}) {
		c.Timings = raftgroup.LoopbackTimings
	}
	if c.Logger == nil {
		c.Logger, c.LogLevel = slog.New(slog.DiscardHandler), slog.LevelError
	}
	g, err := raftgroup.Open(c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close() })
	return g
}
