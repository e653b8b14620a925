package fsm_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/fsm"
)

// A retry that overtakes its original: node A's forward of a request stalls
// in a dead connection, A retries it under the same origin on a new one and
// the group decides the retry; then the original frame arrives. Under the
// base cluster version the original is decided again (what a replica of
// the release before does, so a mixed cluster agrees); from
// ClusterVersionOriginsAlways on it is the retry's decision, and nothing is
// taken twice.
func TestRetryThatOvertookItsOriginal(t *testing.T) {
	o := fsm.MakeOrigin(9, 100)
	original := fsm.AllowRequest{Client: "a", Cost: 2, Origin: o}
	retry := original
	retry.Retry = true
	for _, c := range []struct {
		version uint32
		balance int64
	}{{fsm.BaseClusterVersion, 1}, {fsm.ClusterVersionOriginsAlways, 3}} {
		f := newFSM(t, fsm.Options{Default: policy(5, 0)})
		if c.version > fsm.BaseClusterVersion {
			res := apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: c.version})
			require.True(t, res.Changed)
		}
		require.Equal(t, c.version, f.ClusterVersion())
		first := allowOne(t, f, at(0), retry)
		require.False(t, first.Duplicate || first.Unresolved, "the retry is the first attempt the group sees")
		late := allowOne(t, f, at(time.Second), original)
		assert.Equal(t, c.balance, balance(f, "a"), "cluster version %d", c.version)
		if c.version >= fsm.ClusterVersionOriginsAlways {
			assert.True(t, late.Duplicate, "the late original is the retry's decision")
			assert.Equal(t, o, late.Origin)
		}
	}
}

// From ClusterVersionOriginsAlways on, a first attempt the group may have
// forgotten (a later request of its epoch was forgotten) is Unresolved, as a
// retry would be: the group cannot prove it was never applied.
func TestLateFirstAttemptTheGroupMayHaveForgotten(t *testing.T) {
	o := fsm.MakeOrigin(9, 100)
	f := newFSM(t, fsm.Options{Default: policy(5, 0), OriginDedupMax: 1})
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.ClusterVersionOriginsAlways})
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o + 1, Retry: true})
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o + 2}) // forgets o+1
	d := allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o})
	assert.True(t, d.Unresolved)
	assert.Equal(t, int64(3), balance(f, "a"), "an unresolved attempt takes nothing")
}

func TestSetClusterVersion(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, 0)})
	assert.Equal(t, fsm.BaseClusterVersion, f.ClusterVersion())
	res := apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.BaseClusterVersion})
	assert.False(t, res.Changed, "the version in force")
	res = apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.MaxClusterVersion})
	assert.True(t, res.Changed)
	res = apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.BaseClusterVersion})
	assert.False(t, res.Changed, "a cluster version never moves down")
	assert.Equal(t, fsm.MaxClusterVersion, res.Version)
	msg := fmt.Sprintf("fsm: the group moved to cluster version %d; this binary runs at most %d: run a newer binary", fsm.MaxClusterVersion+1, fsm.MaxClusterVersion)
	assert.PanicsWithValue(t, msg, func() {
		f.ApplyCommand(fsm.Encode(fsm.SetClusterVersion{Version: fsm.MaxClusterVersion + 1}))
	}, "a binary that cannot run the version refuses to go on rather than diverge")
}

// Until the cluster version moves, snapshots keep the format the release
// before reads (2); from then on they carry the version (3).
func TestSnapshotFormatFollowsTheClusterVersion(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, 0)})
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: fsm.MakeOrigin(1, 1)})
	old := f.MarshalSnapshot()
	assert.Equal(t, byte(2), old[len("QRSNAP")], "format 2 at the base cluster version")

	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.ClusterVersionOriginsAlways})
	snap := f.MarshalSnapshot()
	assert.Equal(t, byte(3), snap[len("QRSNAP")])
	// Format 3 writes policies with their algorithm, window, mode and
	// when-unavailable (4 bytes more for the default) and the fills (1),
	// and ends with the cluster version, the epochs allocated, the
	// windows, the audit trail and the client records (5); the rest is
	// format 2's.
	require.Len(t, snap, len(old)+5+5)

	g := newFSM(t, fsm.Options{Default: policy(5, 0)})
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(snap))))
	assert.Equal(t, fsm.ClusterVersionOriginsAlways, g.ClusterVersion())
	assert.Equal(t, snap, g.MarshalSnapshot())

	bad := bytes.Clone(snap)
	bad[len(bad)-5] = byte(fsm.MaxClusterVersion + 1)
	assert.ErrorIs(t, g.Restore(io.NopCloser(bytes.NewReader(bad))), fsm.ErrBadSnapshot, "a version this binary cannot run")
}

// The meta group hands every process its own origin epoch, in turn, from
// the lower half of the space (the upper half is for random first epochs),
// and a restored replica goes on where it left off.
func TestAllocateEpoch(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, 0)})
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.ClusterVersionOriginsAlways})
	seen := map[uint32]bool{}
	for range 100 {
		e := apply[*fsm.EpochResult](t, f, fsm.AllocateEpoch{}).Epoch
		assert.False(t, seen[e], "epoch %d handed out twice", e)
		assert.True(t, e >= 1 && e < fsm.RandomEpochBase, "epoch %d outside the allocated half", e)
		seen[e] = true
	}
	g := newFSM(t, fsm.Options{Default: policy(5, 0)})
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(f.MarshalSnapshot()))))
	next := apply[*fsm.EpochResult](t, g, fsm.AllocateEpoch{}).Epoch
	assert.False(t, seen[next], "a restored replica hands out a new epoch")
	assert.Equal(t, apply[*fsm.EpochResult](t, f, fsm.AllocateEpoch{}).Epoch, next, "replicas agree")
}
