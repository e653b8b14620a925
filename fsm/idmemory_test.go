package fsm_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// atIDMemory is an FSM at ClusterVersionIDMemory.
func atIDMemory(t *testing.T, opts fsm.Options) *fsm.FSM {
	t.Helper()
	f := newFSM(t, opts)
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.ClusterVersionIDMemory})
	return f
}

// allowIDs decides one request of cost 1 for client "hot" for each id, in
// Allow entries of 1,000, all at stamp.
func allowIDs(t *testing.T, f *fsm.FSM, stamp int64, ids []string) []fsm.Decision {
	t.Helper()
	var out []fsm.Decision
	for len(ids) > 0 {
		n := min(1000, len(ids))
		reqs := make([]fsm.AllowRequest, n)
		for i, id := range ids[:n] {
			reqs[i] = fsm.AllowRequest{Client: "hot", Cost: 1, RequestID: id}
		}
		out = append(out, apply[*fsm.AllowResult](t, f, fsm.Allow{Stamp: stamp, Requests: reqs}).Decisions...)
		ids = ids[n:]
	}
	return out
}

func idRange(from, to int) []string {
	ids := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		ids = append(ids, fmt.Sprintf("req-%07d", i))
	}
	return ids
}

// The reproduction of the issue: 300,000 decisions with distinct ids on
// one client within a minute, then the first 100 sent again. Below
// ClusterVersionIDMemory the group forgot them (more than 262,144) and
// spent again; from it on every one is answered as the duplicate it is.
func TestRequestIDsAreRememberedForTheWholeWindow(t *testing.T) {
	const n = 300_000
	big := policy(10*n, 0)
	for _, c := range []struct {
		name    string
		version uint32
		kept    bool
	}{
		{"below the id-memory version", fsm.ClusterVersionOriginsAlways, false},
		{"at it", fsm.ClusterVersionIDMemory, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFSM(t, fsm.Options{Default: big})
			apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: c.version})
			for i, d := range allowIDs(t, f, at(0), idRange(0, n)) {
				require.True(t, d.Allowed && !d.Duplicate && !d.Shed, "request %d", i)
			}
			before := f.View("hot", at(time.Minute)).Decision.Remaining
			again := allowIDs(t, f, at(time.Minute), idRange(0, 100))
			after := f.View("hot", at(time.Minute)).Decision.Remaining
			for i, d := range again {
				assert.Equal(t, c.kept, d.Duplicate, "retry %d", i)
				assert.Equal(t, !c.kept, d.MaybeDuplicate, "retry %d", i)
			}
			if c.kept {
				assert.Equal(t, before, after, "no retry spent a token")
			} else {
				assert.Equal(t, before-100*bucket.Scale, after, "the forgotten retries were spent again")
			}
		})
	}
}

// A group that holds RequestIDMax ids sheds a request with a new id: not
// decided, nothing taken, nothing remembered. Requests without ids and
// retries of remembered ids are answered as always, and once ids expire
// new ones are decided again.
func TestNewRequestIDsAreShedWhenTheMemoryIsFull(t *testing.T) {
	w := time.Duration(fsm.DefaultDedupWindow)
	f := atIDMemory(t, fsm.Options{Default: policy(10, 0), RequestIDMax: 3})
	allow := func(d time.Duration, id string) fsm.Decision {
		return allowOne(t, f, at(d), fsm.AllowRequest{Client: "a", Cost: 1, RequestID: id})
	}
	for i, id := range []string{"r1", "r2", "r3"} {
		d := allow(time.Duration(i)*time.Second, id)
		require.True(t, d.Allowed && !d.Shed, id)
	}
	before := f.View("a", at(3*time.Second)).Decision
	shed := allow(3*time.Second, "r4")
	assert.True(t, shed.Shed, "a fourth id does not fit")
	assert.False(t, shed.Allowed || shed.Duplicate || shed.Unresolved)
	assert.Equal(t, before, f.View("a", at(3*time.Second)).Decision, "nothing taken for it")
	assert.True(t, allow(3*time.Second, "r4").Shed, "and nothing remembered: sent again, it is shed again")
	assert.True(t, allow(3*time.Second, "r1").Duplicate, "a remembered id is still answered")
	assert.False(t, allow(3*time.Second, "").Shed, "a request without an id is decided")
	assert.Equal(t, uint64(0), f.RequestIDsEvictedEarly(), "no id was forgotten early")

	// r1 expires one window after it was decided, and only then.
	assert.True(t, allow(w, "r4").Shed)
	d := allow(w+time.Nanosecond, "r4")
	assert.True(t, d.Allowed && !d.Shed, "r1's window ended: r4 fits")
	assert.True(t, allow(w+time.Nanosecond, "r1").Shed, "r1 is forgotten with its window, and the memory is full again")
	assert.True(t, allow(w+time.Second, "r2").Duplicate, "r2's window has not ended")
}

// Snapshots at ClusterVersionIDMemory hold ids by digest (format 4): a
// replica restored from one answers every remembered id as a duplicate,
// keeps the window, and writes the same bytes as the replica it came from.
// Ids decided before the version moved (kept by name) go into format 4 by
// digest too.
func TestRequestIDsSurviveASnapshotByDigest(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(10_000, 0)})
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.ClusterVersionOriginsAlways})
	allowIDs(t, f, at(0), idRange(0, 500))
	assert.Equal(t, byte(3), f.MarshalSnapshot()[len("QRSNAP")], "format 3 below the version")
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.ClusterVersionIDMemory})
	allowIDs(t, f, at(time.Second), idRange(500, 3000))
	snap := f.MarshalSnapshot()
	assert.Equal(t, byte(4), snap[len("QRSNAP")])

	g := newFSM(t, fsm.Options{Default: policy(10_000, 0)})
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(snap))))
	assert.Equal(t, snap, g.MarshalSnapshot(), "the restored replica writes the same bytes")
	for _, r := range []*fsm.FSM{f, g} {
		ds := allowIDs(t, r, at(2*time.Second), append(idRange(0, 10), idRange(2990, 3000)...))
		for i, d := range ds {
			assert.True(t, d.Duplicate, "id %d", i)
		}
	}
	assert.Equal(t, f.MarshalSnapshot(), g.MarshalSnapshot(), "replicas agree after the retries")

	// The ids of the first second expire on both at the same entry.
	w := time.Duration(fsm.DefaultDedupWindow)
	for _, r := range []*fsm.FSM{f, g} {
		allowIDs(t, r, at(w+time.Nanosecond), idRange(5000, 5001))
		byID, _ := r.Remembered()
		assert.Equal(t, 2500+1, byID, "the first 500 ids are forgotten, the next 2,500 kept")
	}
	assert.Equal(t, f.MarshalSnapshot(), g.MarshalSnapshot())

	bad := bytes.Clone(snap)
	bad[len("QRSNAP")] = 3 // digests read as names
	assert.ErrorIs(t, g.Restore(io.NopCloser(bytes.NewReader(bad))), fsm.ErrBadSnapshot)
}
