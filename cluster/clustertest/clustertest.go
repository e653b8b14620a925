// Package clustertest starts real quorate nodes for the tests of packages
// above cluster (the HTTP API, the fault suite's workload, the command):
// real raft, real log stores in a temporary directory, loopback sockets,
// and the test's own clock. cluster's own tests use the same pieces
// (clock.Manual, cluster.LoopbackRaftTimings) directly.
package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/quorate/quorate/internal/freeport"

	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/cluster/membership"
)

// StartNode starts a single node with opts, every zero field filled in for
// a test: node id "n1", a new temporary data dir, loopback addresses, 4
// groups, no logs, no reclaim, cluster.LoopbackRaftTimings. It returns once
// the node is ready and every group holds a configuration, and closes the
// node when the test ends (closing it earlier is fine: a test may restart a
// node on the same DataDir).
func StartNode(t testing.TB, opts cluster.Options) *cluster.Node {
	t.Helper()
	n := startNode(t, opts)
	waitReady(t, n, opts.NodeID)
	return n
}

// StartCluster starts size nodes, "n1".."n<size>", the first founding the
// cluster and the others joining it, each with opts(i) filled in as
// StartNode does (opts may be nil; a zero HTTPAddr stays zero). It returns
// once every node is ready, every group holds a configuration, and every
// node sees every group's leader.
func StartCluster(t testing.TB, size int, opts func(i int) cluster.Options) []*cluster.Node {
	t.Helper()
	gossip := make([]string, size)
	for i := range gossip {
		gossip[i] = freeport.Addr(t)
	}
	nodes := make([]*cluster.Node, size)
	replicas := cluster.DefaultReplicas
	for i := range nodes {
		var o cluster.Options
		if opts != nil {
			o = opts(i)
		}
		if o.Replicas > 0 {
			replicas = o.Replicas
		}
		o.NodeID = fmt.Sprintf("n%d", i+1)
		o.GossipAddr = gossip[i]
		if i > 0 {
			o.Join = []string{gossip[0]}
		}
		if o.PlacementInterval == 0 {
			o.PlacementInterval = 50 * time.Millisecond
		}
		nodes[i] = startNode(t, o)
	}
	for _, n := range nodes {
		waitReady(t, n, "a node of the cluster")
	}
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			rt := n.Routes()
			if len(rt.Leaders) != rt.Groups {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "the nodes never agreed on every group's leader")
	waitPlaced(t, nodes, replicas)
	return nodes
}

// waitPlaced waits until placement is done with a new cluster: every group
// has min(replicas, nodes) voters and is led by its preferred leader, as
// every node sees it. Until then placement may still move a leader, under
// a test that expects decisions at the leader it read.
func waitPlaced(t testing.TB, nodes []*cluster.Node, replicas int) {
	t.Helper()
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		st, err := n.Status(context.Background())
		require.NoError(t, err)
		ids[i] = st.NodeID
	}
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			st, err := n.Status(context.Background())
			if err != nil {
				return false
			}
			groupIDs := make([]string, len(st.Groups))
			for i, g := range st.Groups {
				groupIDs[i] = g.ID
			}
			preferred := membership.PreferredLeaders(groupIDs, ids, replicas)
			for _, g := range st.Groups {
				if g.Leader != preferred[g.ID] || len(g.Voters) != min(replicas, len(nodes)) {
					return false
				}
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "placement never settled: a group without its preferred leader or its voters")
}

func startNode(t testing.TB, opts cluster.Options) *cluster.Node {
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
	return n
}

// waitReady waits until n is ready and every group it serves holds a
// configuration.
func waitReady(t testing.TB, n *cluster.Node, id string) {
	t.Helper()
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
	}, 20*time.Second, 5*time.Millisecond, "node %s never became ready", id)
}
