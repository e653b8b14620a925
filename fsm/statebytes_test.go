package fsm_test

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// StateBytes follows the state: it grows with buckets and remembered ids
// about as the live heap does, falls back to nothing as they are reclaimed
// and forgotten, and a restored replica counts the same; below the
// id-memory cluster version (ids kept with their names) and at it (by
// digest).
func TestStateBytesFollowsTheState(t *testing.T) {
	for _, v := range []uint32{fsm.BaseClusterVersion, fsm.ClusterVersionIDMemory} {
		t.Run(fmt.Sprintf("cluster version %d", v), func(t *testing.T) { stateBytesFollowsTheState(t, v) })
	}
}

func stateBytesFollowsTheState(t *testing.T, version uint32) {
	f := newFSM(t, fsm.Options{Default: policy(5, bucket.Scale)})
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: version})
	assert.Zero(t, f.StateBytes())
	before := liveHeap()
	const n = 50_000
	applyNewClients(f, n, 256, 128)
	grew := float64(liveHeap() - before)
	est := float64(f.StateBytes())
	t.Logf("heap grew %.0f bytes a decision, StateBytes says %.0f", grew/n, est/n)
	assert.InDelta(t, 1, est/grew, 0.3, "StateBytes %.0f, heap grew %.0f", est, grew)

	g := newFSM(t, fsm.Options{Default: policy(5, bucket.Scale)})
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(f.MarshalSnapshot()))))
	assert.Equal(t, f.StateBytes(), g.StateBytes(), "a restored replica counts the same")

	// Ten minutes on, every bucket is full and every id forgotten.
	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(10 * time.Minute)})
	assert.Zero(t, f.StateBytes())
	runtime.KeepAlive(g)
}

// Memory follows the state: after 200,000 clients with request ids come
// and go (refilled and reclaimed, ids forgotten), the heap falls back to
// within a few MiB of where it started, not to the structures' peak size.
func TestMemoryFollowsTheState(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, bucket.Scale), DedupMax: 1 << 20})
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.MaxClusterVersion})
	start := liveHeap()
	const n = 200_000
	applyNewClients(f, n, 64, 32)
	peak := liveHeap()
	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(10 * time.Minute)})
	require.Zero(t, f.Buckets())
	end := liveHeap()
	t.Logf("heap: %.1f MiB at start, %.1f MiB at the peak, %.1f MiB once reclaimed", float64(start)/(1<<20), float64(peak)/(1<<20), float64(end)/(1<<20))
	assert.Less(t, end-start, int64(4<<20), "the emptied maps and windows kept their peak size")
	runtime.KeepAlive(f)
}

// applyNewClients decides one request each for n new clients, with client
// ids of clientLen bytes and request ids of idLen, in entries of 1,000.
func applyNewClients(f *fsm.FSM, n, clientLen, idLen int) {
	reqs := make([]fsm.AllowRequest, 1000)
	for i := range n / len(reqs) {
		for j := range reqs {
			k := i*len(reqs) + j
			reqs[j] = fsm.AllowRequest{Client: fmt.Sprintf("%0*d", clientLen, k), Cost: 1, RequestID: fmt.Sprintf("%0*d", idLen, k)}
		}
		f.ApplyCommand(fsm.Encode(fsm.Allow{Stamp: at(0), Requests: reqs}))
	}
}

// liveHeap collects and returns the heap in use.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
