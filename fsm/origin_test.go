package fsm_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/fsm"
)

// balance returns alice's whole tokens, seen without consuming.
func balance(f *fsm.FSM, client string) int64 {
	v := f.View(client, 0)
	return v.Decision.RemainingTokens()
}

func TestAllowWithOriginsRoundTrips(t *testing.T) {
	a := fsm.Allow{Stamp: at(3), Requests: []fsm.AllowRequest{
		{Client: "a", Cost: 1, Origin: fsm.MakeOrigin(5, 1)},
		{Client: "b", Cost: 2, RequestID: "x", Origin: fsm.MakeOrigin(5, 2), Retry: true},
		{Client: "c", Cost: 0},
	}}
	data := fsm.Encode(a)
	assert.Equal(t, byte(fsm.TypeAllowOrigin), data[1])
	got, err := fsm.Decode(data)
	require.NoError(t, err)
	assert.Equal(t, a, got)

	// Without origins an allow keeps the original encoding.
	plain := fsm.Allow{Stamp: at(3), Requests: []fsm.AllowRequest{{Client: "a", Cost: 1}}}
	assert.Equal(t, byte(fsm.TypeAllow), fsm.Encode(plain)[1])
}

// A node that proposed a request and lost its answer retries it under the
// same origin; the group answers with what it did the first time, or
// decides now if it never applied it, and never both.
func TestRetryByOrigin(t *testing.T) {
	o := fsm.MakeOrigin(9, 100)
	t.Run("applied: the original decision, nothing taken", func(t *testing.T) {
		f := newFSM(t, fsm.Options{Default: policy(5, 0)})
		first := allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 2, Origin: o})
		assert.Equal(t, o, first.Origin)
		retry := allowOne(t, f, at(time.Second), fsm.AllowRequest{Client: "a", Cost: 2, Origin: o, Retry: true})
		assert.True(t, retry.Duplicate)
		assert.Equal(t, o, retry.Origin, "the proposing node recognises its own decision by the origin")
		assert.Equal(t, first.Remaining, retry.Remaining)
		assert.Equal(t, int64(3), balance(f, "a"))
	})
	t.Run("never applied: decided now", func(t *testing.T) {
		f := newFSM(t, fsm.Options{Default: policy(5, 0)})
		d := allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 2, Origin: o, Retry: true})
		assert.False(t, d.Duplicate)
		assert.False(t, d.Unresolved)
		assert.Equal(t, int64(3), balance(f, "a"))
	})
	t.Run("forgotten: unresolved, nothing taken", func(t *testing.T) {
		f := newFSM(t, fsm.Options{Default: policy(5, 0)})
		allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 2, Origin: o})
		w := time.Duration(fsm.DefaultOriginDedupWindow)
		d := allowOne(t, f, at(w+1), fsm.AllowRequest{Client: "a", Cost: 2, Origin: o, Retry: true})
		assert.True(t, d.Unresolved, "the group forgot origin %#x and cannot tell", o)
		assert.Equal(t, int64(3), balance(f, "a"), "an unresolved retry takes nothing")
		// A later request of the same node, never applied, is still new.
		d = allowOne(t, f, at(w+2), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o + 1, Retry: true})
		assert.False(t, d.Unresolved)
		assert.Equal(t, int64(2), balance(f, "a"))
	})
	t.Run("evicted by count: unresolved", func(t *testing.T) {
		f := newFSM(t, fsm.Options{Default: policy(50, 0), OriginDedupMax: 2})
		for i := range uint64(3) {
			allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o + i})
		}
		d := allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o, Retry: true})
		assert.True(t, d.Unresolved)
		d = allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o + 2, Retry: true})
		assert.True(t, d.Duplicate)
	})
	t.Run("other epochs are not affected", func(t *testing.T) {
		f := newFSM(t, fsm.Options{Default: policy(5, 0), OriginDedupMax: 1})
		allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: fsm.MakeOrigin(1, 500)})
		allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: fsm.MakeOrigin(1, 501)})
		d := allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: fsm.MakeOrigin(2, 5), Retry: true})
		assert.False(t, d.Unresolved)
		assert.False(t, d.Duplicate)
	})
	t.Run("request id: the decision tells whose it was", func(t *testing.T) {
		f := newFSM(t, fsm.Options{Default: policy(5, 0)})
		earlier := fsm.MakeOrigin(9, 50)
		allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, RequestID: "x", Origin: earlier})
		// Another call with the same id (the caller's own retry) gets the
		// earlier call's decision: a duplicate of a request not its own.
		d := allowOne(t, f, at(1), fsm.AllowRequest{Client: "a", Cost: 1, RequestID: "x", Origin: o})
		assert.True(t, d.Duplicate)
		assert.Equal(t, earlier, d.Origin)
		assert.Equal(t, int64(4), balance(f, "a"))
	})
	t.Run("a request id forgotten by count is unresolved on retry", func(t *testing.T) {
		f := newFSM(t, fsm.Options{Default: policy(5, 0), DedupMax: 1})
		allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, RequestID: "x", Origin: o})
		allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, RequestID: "y", Origin: o + 1})
		d := allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, RequestID: "x", Origin: o, Retry: true})
		assert.True(t, d.Unresolved)
		assert.Equal(t, int64(3), balance(f, "a"))
	})
}

func TestOriginMarksArePrunedAndSnapshotted(t *testing.T) {
	o := fsm.MakeOrigin(4, 10)
	f := newFSM(t, fsm.Options{Default: policy(5, 0), OriginDedupMax: 1})
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o})
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o + 1}) // forgets o

	// A restored replica answers a retry the same way.
	g := newFSM(t, fsm.Options{Default: policy(5, 0), OriginDedupMax: 1})
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(f.MarshalSnapshot()))))
	assert.Equal(t, f.MarshalSnapshot(), g.MarshalSnapshot())
	retry := fsm.AllowRequest{Client: "a", Cost: 1, Origin: o, Retry: true}
	assert.True(t, allowOne(t, g, at(time.Second), retry).Unresolved)
	assert.True(t, allowOne(t, g, at(time.Second), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o + 1, Retry: true}).Duplicate)

	// Forgetting o+1 by time raises the mark again; five minutes after
	// that, no retry can need the mark and reclaim drops it.
	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(time.Minute)})
	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(6 * time.Minute)})
	assert.True(t, allowOne(t, f, at(6*time.Minute), retry).Unresolved, "the mark lives five minutes")
	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(6*time.Minute + 1)})
	assert.False(t, allowOne(t, f, at(6*time.Minute+1), retry).Unresolved)
}
