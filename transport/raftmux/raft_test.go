package raftmux_test

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	fsms := make(map[string][]*recordingFSM) // group -> one per node
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
		leader := waitLeader(t, rafts[g])
		cmds := make([]string, perGroup)
		for i := range cmds {
			cmds[i] = fmt.Sprintf("%s-%03d", g, i)
		}
		want[g] = cmds
		go func() { errs <- applyAll(leader, cmds) }()
	}
	for range groups {
		require.NoError(t, <-errs)
	}

	for _, g := range groups {
		for i, fsm := range fsms[g] {
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.Equal(c, want[g], fsm.applied())
			}, failsafe, 5*time.Millisecond, "group %s on %s", g, nodeIDs[i])
		}
	}
}

// startRaft starts the member id of the group whose streams run on layer,
// bootstrapped with servers, and shuts it down at cleanup.
func startRaft(t *testing.T, id string, layer *raftmux.Layer, servers []raft.Server) (*raft.Raft, *recordingFSM) {
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
	fsm := &recordingFSM{}
	r, err := raft.NewRaft(cfg, fsm, store, store, raft.NewInmemSnapshotStore(), trans)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.Shutdown().Error()) })
	require.NoError(t, r.BootstrapCluster(raft.Configuration{Servers: servers}).Error())
	return r, fsm
}

// waitLeader waits until one of rs leads and returns it.
func waitLeader(t *testing.T, rs []*raft.Raft) *raft.Raft {
	t.Helper()
	var leader *raft.Raft
	require.Eventually(t, func() bool {
		for _, r := range rs {
			if r.State() == raft.Leader {
				leader = r
				return true
			}
		}
		return false
	}, failsafe, 5*time.Millisecond, "no leader elected")
	return leader
}

// applyAll proposes cmds in order on r and waits for all of them to commit.
func applyAll(r *raft.Raft, cmds []string) error {
	futures := make([]raft.ApplyFuture, len(cmds))
	for i, cmd := range cmds {
		futures[i] = r.Apply([]byte(cmd), failsafe)
	}
	for i, f := range futures {
		if err := f.Error(); err != nil {
			return fmt.Errorf("apply %q: %w", cmds[i], err)
		}
	}
	return nil
}

// recordingFSM records the commands it applies, in order.
type recordingFSM struct {
	mu   sync.Mutex
	cmds []string
}

var _ raft.FSM = (*recordingFSM)(nil)

func (f *recordingFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, string(l.Data))
	return nil
}

func (f *recordingFSM) applied() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cmds)
}

func (f *recordingFSM) Snapshot() (raft.FSMSnapshot, error) {
	return recordedSnapshot(f.applied()), nil
}

func (f *recordingFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var cmds []string
	if err := json.NewDecoder(rc).Decode(&cmds); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = cmds
	return nil
}

type recordedSnapshot []string

func (s recordedSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]string(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (recordedSnapshot) Release() {}
