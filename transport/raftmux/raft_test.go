package raftmux_test

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/internal/rafttest"
	"github.com/quorate/quorate/transport/raftmux"
)

// TestRaftGroups runs three raft groups on three nodes, every group's
// traffic on its node's single Mux, and checks that each group replicates
// exactly its own log.
func TestRaftGroups(t *testing.T) {
	nodeIDs := []string{"n1", "n2", "n3"}
	groups := []string{"a", "b", "c"}
	const perGroup = 100

	nodes := make([]*node, len(nodeIDs))
	var servers []raft.Server
	for i, id := range nodeIDs {
		nodes[i] = startNode(t, raftmux.Options{}, groups...)
		servers = append(servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(id),
			Address:  raft.ServerAddress(nodes[i].addr()),
		})
	}

	rafts := make(map[string][]*raft.Raft)   // group -> one per node
	fsms := make(map[string][]*rafttest.FSM) // group -> one per node
	for _, g := range groups {
		for i, id := range nodeIDs {
			r, fsm := startRaft(t, id, nodes[i].layers[g], servers)
			rafts[g] = append(rafts[g], r)
			fsms[g] = append(fsms[g], fsm)
		}
	}

	// Every group proposes at once, so the streams of all groups interleave
	// on every node's port.
	want := make(map[string][]string)
	errs := make(chan error, len(groups))
	for _, g := range groups {
		leader := rafts[g][rafttest.WaitLeader(t, rafts[g]...)]
		cmds := rafttest.Commands(g, perGroup)
		want[g] = cmds
		go func() { errs <- rafttest.ApplyAll(leader, cmds) }()
	}
	for range groups {
		require.NoError(t, <-errs)
	}

	for _, g := range groups {
		for i, fsm := range fsms[g] {
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Equal(c, want[g], fsm.Applied())
			}, failsafe, 5*time.Millisecond, "group %s on %s", g, nodeIDs[i])
		}
	}
}

// startRaft starts the member id of the group whose streams run on layer,
// bootstrapped with servers, and shuts it down at cleanup.
func startRaft(t *testing.T, id string, layer *raftmux.Layer, servers []raft.Server) (*raft.Raft, *rafttest.FSM) {
	t.Helper()
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: 3,
		Timeout: 2 * time.Second,
		Logger:  hclog.NewNullLogger(),
	})
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(id)
	cfg.HeartbeatTimeout = 100 * time.Millisecond
	cfg.ElectionTimeout = 100 * time.Millisecond
	cfg.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.Logger = hclog.NewNullLogger()

	store := raft.NewInmemStore()
	fsm := &rafttest.FSM{}
	r, err := raft.NewRaft(cfg, fsm, store, store, raft.NewInmemSnapshotStore(), trans)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.Shutdown().Error()) })
	require.NoError(t, r.BootstrapCluster(raft.Configuration{Servers: servers}).Error())
	return r, fsm
}
