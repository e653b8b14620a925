// Package clustertest starts real quorate nodes for the tests of packages
// above cluster (the HTTP API, the fault suite's workload, the command):
// real raft, real log stores in a temporary directory, loopback sockets,
// and the test's own clock. cluster's own tests use the same pieces
// (cluster.ManualClock, cluster.LoopbackRaftTimings) directly.
package clustertest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster"
)

// StartNode starts a single node with opts, every zero field filled in for
// a test: node id "n1", a new temporary data dir, loopback addresses, 4
// groups, no logs, no reclaim, cluster.LoopbackRaftTimings. It returns once
// the node is ready and every group holds a configuration, and closes the
// node when the test ends (closing it earlier is fine: a test may restart a
// node on the same DataDir).
func StartNode(t testing.TB, opts cluster.Options) *cluster.Node {
	t.Helper()
	if opts.NodeID == "" {
		opts.NodeID = "n1"
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.RaftAddr == "" {
		opts.RaftAddr = "127.0.0.1:0"
	}
	if opts.GossipAddr == "" {
		opts.GossipAddr = "127.0.0.1:0"
	}
	if opts.Groups == 0 {
		opts.Groups = 4
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReclaimInterval == 0 {
		opts.ReclaimInterval = -1
	}
	if opts.Raft == (cluster.RaftTimings{}) {
		opts.Raft = cluster.LoopbackRaftTimings
	}
	n, err := cluster.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if n.Ready(ctx) != nil {
			return false
		}
		st, err := n.Status(ctx)
		if err != nil {
			return false
		}
		for _, g := range st.Groups {
			if g.ConfigVersion < 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "node %s never became ready", opts.NodeID)
	return n
}
