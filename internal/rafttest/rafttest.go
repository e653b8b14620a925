// Package rafttest holds what the transports' tests need to run real raft
// groups over them: an FSM that records what it applies, waiting for a
// leader, and applying a list of commands. It is imported by tests only.
package rafttest

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// Failsafe bounds every wait here. It only turns a hang into a failure;
// nothing waits for it to pass.
const Failsafe = 10 * time.Second

// FSM records the commands it applies, in order, and how many snapshots it
// restored; its snapshots are the commands as JSON.
type FSM struct {
	mu       sync.Mutex
	cmds     []string
	restored int
}

var _ raft.FSM = (*FSM)(nil)

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, string(l.Data))
	return nil
}

// Applied returns the commands applied so far.
func (f *FSM) Applied() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cmds)
}

// Restores returns how many snapshots were restored.
func (f *FSM) Restores() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restored
}

// Snapshot implements raft.FSM.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) { return snapshot(f.Applied()), nil }

// Restore implements raft.FSM.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var cmds []string
	if err := json.NewDecoder(rc).Decode(&cmds); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = cmds
	f.restored++
	return nil
}

type snapshot []string

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]string(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (snapshot) Release() {}

// WaitLeader waits until one of rs leads and returns its index.
func WaitLeader(t *testing.T, rs ...*raft.Raft) int {
	t.Helper()
	leader := -1
	require.Eventually(t, func() bool {
		for i, r := range rs {
			if r.State() == raft.Leader {
				leader = i
				return true
			}
		}
		return false
	}, Failsafe, 5*time.Millisecond, "no leader elected")
	return leader
}

// ApplyAll proposes cmds in order on r and waits for all of them to commit.
func ApplyAll(r *raft.Raft, cmds []string) error {
	futures := make([]raft.ApplyFuture, len(cmds))
	for i, cmd := range cmds {
		futures[i] = r.Apply([]byte(cmd), Failsafe)
	}
	for i, f := range futures {
		if err := f.Error(); err != nil {
			return fmt.Errorf("apply %q: %w", cmds[i], err)
		}
	}
	return nil
}

// Commands returns n distinct commands named after prefix.
func Commands(prefix string, n int) []string {
	cmds := make([]string, n)
	for i := range cmds {
		cmds[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return cmds
}
