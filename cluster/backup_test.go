package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/quorate/quorate/internal/freeport"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/backup"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/datadir"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
)

// backupTo writes a backup through n to a file in a temp dir.
func backupTo(t *testing.T, n *Node) string {
	t.Helper()
	var buf bytes.Buffer
	h, err := n.Backup(ctx(t), &buf)
	require.NoError(t, err)
	assert.Equal(t, len(n.groups), h.Groups)
	path := filepath.Join(t.TempDir(), "cluster.qbak")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))
	return path
}

// restoredCluster restores the backup at path into a new data dir (of
// log layout logStore, "" for the default) and starts a one-node cluster
// on it, on clock.
func restoredCluster(t *testing.T, path string, groups int, clock clock.Clock, logStore string) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, clock: clock, groups: groups, partition: &Partition{}, deadAfter: time.Hour}
	dir := filepath.Join(t.TempDir(), "restored")
	tc.dirs = []string{dir}
	tc.raft = []string{freeport.Addr(t)}
	tc.gossip = []string{freeport.Addr(t)}
	tc.nodes = []*Node{nil}
	h, restored, err := datadir.Restore(path, datadir.RestoreOptions{DataDir: dir, NodeID: "n1", RaftAddr: tc.raft[0], LogStore: logStore})
	require.NoError(t, err)
	require.Len(t, restored, groups+1)
	assert.Equal(t, groups, h.Groups)
	tc.start(0)
	tc.waitStable(1)
	return tc
}

// A backup taken through a node that leads only some groups, while
// decisions go on, holds every decision acknowledged before it began: the
// restored one-node cluster answers each of their request ids with the
// original decision, and no balance is higher than those decisions left it.
func TestBackupUnderLoadKeepsEveryAcknowledgedDecision(t *testing.T) {
	tc := newTestCluster(t, 3)
	const capacity = 1000
	_, err := tc.nodes[0].ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "fixed", Policy: bucket.Policy{Capacity: capacity, Rate: 0}})
	require.NoError(t, err)
	clients := make([]string, 12)
	for i := range clients {
		clients[i] = fmt.Sprintf("k%d", i)
		require.NoError(t, tc.nodes[0].SetClientTier(ctx(t), clients[i], "fixed", "ops"))
	}
	type acked struct {
		client, id string
		allowed    bool
	}
	var mu sync.Mutex
	var done []acked
	spent := map[string]int64{} // admitted or of unknown outcome, by client
	stopLoad := runLoad(t, 4, 5_000, func(w, i int) {
		c := clients[(w*7+i)%len(clients)]
		id := fmt.Sprintf("w%d-%d", w, i)
		cx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		ds, err := tc.nodes[(w+i)%3].Allow(cx, []fsm.AllowRequest{{Client: c, Cost: 1, RequestID: id}})
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			done = append(done, acked{c, id, ds[0].Allowed})
		}
		if err != nil || ds[0].Allowed {
			spent[c]++
		}
	})
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(done) >= 200 }, 20*time.Second, time.Millisecond)
	mu.Lock()
	before := append([]acked(nil), done...) // acknowledged before the backup began
	mu.Unlock()
	path := backupTo(t, tc.nodes[1])
	stopLoad()

	admittedBefore := map[string]int64{}
	for _, a := range before {
		if a.allowed {
			admittedBefore[a.client]++
		}
	}
	rc := restoredCluster(t, path, tc.groups, tc.clock, "")
	r := rc.nodes[0]
	for _, c := range clients {
		v, err := r.Client(ctx(t), c)
		require.NoError(t, err)
		assert.Equal(t, "fixed", v.Tier, "%s's tier", c)
		left := v.Decision.RemainingTokens()
		assert.LessOrEqual(t, left, int64(capacity)-admittedBefore[c], "%s: a decision acknowledged before the backup is missing", c)
		assert.GreaterOrEqual(t, left, int64(capacity)-spent[c], "%s: more spent than was ever asked", c)
	}
	for _, a := range before {
		ds, err := r.Allow(ctx(t), []fsm.AllowRequest{{Client: a.client, Cost: 1, RequestID: a.id}})
		require.NoError(t, err)
		require.True(t, ds[0].Duplicate, "request %s was acknowledged before the backup, yet the restored cluster decided it afresh", a.id)
		assert.Equal(t, a.allowed, ds[0].Allowed, "request %s", a.id)
	}
}

// With nothing deciding, a restored cluster's groups hold exactly the
// state of the cluster backed up: the same snapshot bytes.
func TestRestoreReproducesEveryGroupExactly(t *testing.T) {
	tc := newTestCluster(t, 3)
	_, err := tc.nodes[0].ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: bucket.Policy{Capacity: 50, Rate: bucket.Scale}})
	require.NoError(t, err)
	for i := range 40 {
		c := fmt.Sprintf("c%d", i)
		if i%3 == 0 {
			require.NoError(t, tc.nodes[i%3].SetClientTier(ctx(t), c, "pro", "ops"))
		}
		_, err := tc.nodes[i%3].Allow(ctx(t), []fsm.AllowRequest{{Client: c, Cost: int64(1 + i%5), RequestID: fmt.Sprintf("r%d", i)}})
		require.NoError(t, err)
		tc.clock.(*clock.Manual).Advance(time.Millisecond)
	}
	path := backupTo(t, tc.nodes[2])
	want := map[string][]byte{}
	for _, g := range tc.nodes[0].groups {
		want[g.ID] = tc.leaderReplica(g.ID).FSM.MarshalSnapshot()
	}
	for _, layout := range []string{raftgroup.LogStoreShared, raftgroup.LogStoreBoltDB} {
		rc := restoredCluster(t, path, tc.groups, tc.clock, layout)
		for _, g := range rc.nodes[0].groups {
			assert.True(t, bytes.Equal(want[g.ID], g.FSM.MarshalSnapshot()), "%s: group %s differs from the one backed up", layout, g.ID)
		}
		assert.Equal(t, tc.nodes[0].meta.FSM.Config(), rc.nodes[0].meta.FSM.Config(), layout)
	}
}

// A backup cut short or damaged anywhere is refused before anything is
// written; so is a data dir that already holds something.
func TestRestoreRefusesDamageAndWritesNothing(t *testing.T) {
	tc := newTestCluster(t, 1)
	_, err := tc.nodes[0].Allow(ctx(t), []fsm.AllowRequest{{Client: "alice", Cost: 1}})
	require.NoError(t, err)
	path := backupTo(t, tc.nodes[0])
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "d")
	opts := datadir.RestoreOptions{DataDir: dir, NodeID: "n1", RaftAddr: "127.0.0.1:1"}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"truncated", good[:len(good)-1]},
		{"half", good[:len(good)/2]},
		{"a byte flipped in the middle", flip(good, len(good)/2)},
		{"empty", nil},
	} {
		require.NoError(t, os.WriteFile(path, c.data, 0o600))
		_, _, err := datadir.Restore(path, opts)
		assert.ErrorIs(t, err, backup.ErrDamaged, c.name)
		_, statErr := os.Stat(dir)
		assert.True(t, os.IsNotExist(statErr), "%s: the data dir was created", c.name)
		entries, _ := os.ReadDir(filepath.Dir(dir))
		assert.Empty(t, entries, "%s: something was left beside it", c.name)
	}

	require.NoError(t, os.WriteFile(path, good, 0o600))
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x"), nil, 0o600))
	_, _, err = datadir.Restore(path, opts)
	assert.ErrorContains(t, err, "not empty")
	for _, bad := range []datadir.RestoreOptions{{DataDir: dir + "2", NodeID: "n1"}, {NodeID: "n1", RaftAddr: "127.0.0.1:1"},
		{DataDir: dir + "2", NodeID: "n1", RaftAddr: "127.0.0.1:1", LogStore: "ext4"}} {
		_, _, err = datadir.Restore(path, bad)
		assert.Error(t, err, "%+v", bad)
	}
	_, statErr := os.Stat(dir + "2")
	assert.True(t, os.IsNotExist(statErr))
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x40
	return c
}

// leaderReplica is the replica of group id on the node serving it.
func (tc *testCluster) leaderReplica(id string) *raftgroup.Group {
	tc.t.Helper()
	for _, n := range tc.live() {
		for _, g := range n.allGroups() {
			if g.ID == id && g.Serving() {
				return g
			}
		}
	}
	require.FailNow(tc.t, "no node serves group "+id)
	return nil
}

// A backup through a node cut off from the others fails at once with
// ErrUnavailable (as a decision there does) rather than waiting for a
// leader, and names the group.
func TestBackupWithoutAMajorityFailsAtOnce(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.stop(1)
	tc.stop(2)
	survivor := tc.nodes[0]
	var buf bytes.Buffer
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	require.Eventually(t, func() bool {
		buf.Reset()
		_, err := survivor.Backup(c, &buf)
		return errors.Is(err, ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded)
	}, 10*time.Second, 50*time.Millisecond)
	assert.Less(t, time.Since(start), 10*time.Second)
	_, err := survivor.Backup(c, &buf)
	assert.ErrorContains(t, err, "backup of group")
	_, rerr := backup.Read(bytes.NewReader(buf.Bytes()), nil)
	assert.ErrorIs(t, rerr, backup.ErrDamaged, "what was written is an incomplete backup")
}

// Below cluster version 2 a node of the release before may lead a group
// and cannot stream it: a backup is refused before anything is written.
func TestBackupNeedsClusterVersion2(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual(), func(o *Options) { o.maxClusterVersion = fsm.BaseClusterVersion })
	require.Eventually(t, func() bool { return n.ClusterVersion() == fsm.BaseClusterVersion }, 10*time.Second, 5*time.Millisecond)
	var buf bytes.Buffer
	_, err := n.Backup(ctx(t), &buf)
	require.ErrorIs(t, err, ErrClusterVersion)
	assert.Zero(t, buf.Len(), "nothing written")
}
