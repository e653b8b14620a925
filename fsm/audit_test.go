package fsm_test

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

func by(actor string, stamp int64) fsm.Audited { return fsm.Audited{Stamp: stamp, Actor: actor} }

// A configuration change with a stamp is recorded with who made it, when,
// and the policy before and after; one without (cluster version 1's
// entries) and one refused record nothing.
func TestConfigChangesAreAudited(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, 0)})
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.ClusterVersionAudit})
	free, more := policy(10, bucket.Scale), policy(20, bucket.Scale)
	apply[*fsm.ConfigResult](t, f, setTierOp("free", free)) // v1, not audited

	raise := setTierOp("free", more)
	raise.OnRaise, raise.Audited = bucket.Fill, by("ops", at(time.Second))
	apply[*fsm.ConfigResult](t, f, raise) // v2
	del := fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "free", Audited: by("", at(2*time.Second))}
	apply[*fsm.ConfigResult](t, f, del) // v3, anonymous
	def := fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: policy(6, 0), Audited: by("ops", at(3*time.Second))}
	apply[*fsm.ConfigResult](t, f, def) // v4
	missing := fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "free", Audited: by("ops", at(4*time.Second))}
	require.Error(t, apply[*fsm.ConfigResult](t, f, missing).Err)

	page := f.Audit(0, 100)
	assert.Equal(t, []fsm.AuditEntry{
		{Version: 2, Act: fsm.Act{At: at(time.Second), By: "ops"}, Kind: fsm.OpSetTier, Tier: "free", Before: &free, After: &more, OnRaise: bucket.Fill},
		{Version: 3, Act: fsm.Act{At: at(2 * time.Second), By: fsm.Anonymous}, Kind: fsm.OpDeleteTier, Tier: "free", Before: &more},
		{Version: 4, Act: fsm.Act{At: at(3 * time.Second), By: "ops"}, Kind: fsm.OpSetDefault, Before: ptr(policy(5, 0)), After: ptr(policy(6, 0))},
	}, page.Entries)
	assert.False(t, page.More)
	assert.Equal(t, uint64(2), page.Oldest)
	assert.Zero(t, f.HighWater(), "an audited change does not move the group's time")

	page = f.Audit(2, 1)
	require.Len(t, page.Entries, 1)
	assert.Equal(t, uint64(3), page.Entries[0].Version, "the changes after version 2, one of them")
	assert.True(t, page.More)
	assert.Empty(t, f.Audit(4, 10).Entries, "nothing after the newest")
	assert.False(t, f.Audit(4, 10).More)
}

func ptr[T any](v T) *T { return &v }

// The trail keeps the last MaxAuditEntries changes: the oldest go first,
// and Audit says from which version it holds them.
func TestAuditTrailIsBounded(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, 0)})
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.ClusterVersionAudit})
	const extra = 25
	for i := range fsm.MaxAuditEntries + extra {
		op := setTierOp("free", policy(int64(1+i%100), 0))
		op.Audited = by("ops", at(time.Duration(i)))
		apply[*fsm.ConfigResult](t, f, op)
	}
	page := f.Audit(0, 2*fsm.MaxAuditEntries)
	trail := page.Entries
	require.Len(t, trail, fsm.MaxAuditEntries)
	assert.False(t, page.More)
	assert.Equal(t, uint64(extra+1), page.Oldest, "the first %d changes were forgotten", extra)
	assert.Equal(t, uint64(extra+1), trail[0].Version)
	assert.Equal(t, uint64(fsm.MaxAuditEntries+extra), trail[len(trail)-1].Version)

	g := newFSM(t, fsm.Options{Default: policy(5, 0)})
	snap := f.MarshalSnapshot()
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(snap))))
	assert.Equal(t, trail, g.Audit(0, 2*fsm.MaxAuditEntries).Entries, "a snapshot holds the trail")
	assert.Equal(t, f.StateBytes(), g.StateBytes(), "and a restored replica counts it the same")
	assert.Equal(t, snap, g.MarshalSnapshot())
}

// A client's last assignment and reset outlive its bucket: reclaim forgets
// the bucket, not the record. The record goes 30 days (group time) after
// the last act of a client that has no tier assignment, and never while it
// has one.
func TestClientRecordsSurviveReclaim(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, bucket.Scale)})
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.ClusterVersionAudit})
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "kept", Cost: 1})
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "moved", Cost: 1})
	apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "kept", Tier: "pro", Audited: by("ops", at(time.Second))})
	apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "moved", Tier: "pro", Audited: by("ops", at(time.Second))})
	apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "moved", Audited: by("deploy", at(2*time.Second))})
	apply[*fsm.ResetResult](t, f, fsm.ResetClient{Client: "moved", Audited: by("", at(3*time.Second))})
	apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "untracked", Tier: "pro"}) // cluster version 1's form

	want := map[string]fsm.ClientRecord{
		"kept":  {Assigned: fsm.Act{At: at(time.Second), By: "ops"}, AssignedTier: "pro"},
		"moved": {Assigned: fsm.Act{At: at(2 * time.Second), By: "deploy"}, Reset: fsm.Act{At: at(3 * time.Second), By: fsm.Anonymous}},
	}
	check := func(when string, want map[string]fsm.ClientRecord) {
		t.Helper()
		for _, c := range []string{"kept", "moved", "untracked"} {
			r, ok := f.Record(c)
			w, wantOK := want[c]
			assert.Equal(t, wantOK, ok, "%s: record of %s kept", when, c)
			assert.Equal(t, w, r, "%s: record of %s", when, c)
			assert.Equal(t, w, f.View(c, 0).Record, "%s: the view of %s shows its record", when, c)
		}
	}
	check("applied", want)

	res := apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(time.Hour)})
	require.Equal(t, 1, res.Buckets, "the full bucket of kept is reclaimed (moved's was reset)")
	require.False(t, f.Known("kept"))
	check("an hour on, buckets reclaimed", want)

	g := newFSM(t, fsm.Options{Default: policy(5, bucket.Scale)})
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(f.MarshalSnapshot()))))
	assert.Equal(t, f.MarshalSnapshot(), g.MarshalSnapshot(), "a snapshot holds the records")
	assert.Equal(t, f.StateBytes(), g.StateBytes())

	assert.False(t, f.Reclaimable(at(3*time.Second+30*24*time.Hour)), "no bucket left, and no record old enough")
	assert.True(t, f.Reclaimable(at(3*time.Second+30*24*time.Hour)+1), "the record of moved is past the retention")
	assert.True(t, g.Reclaimable(at(3*time.Second+30*24*time.Hour)+1), "a restored replica knows it too")
	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(3*time.Second + 30*24*time.Hour)})
	check("30 days after the reset: not yet older than the retention", want)
	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(3*time.Second+30*24*time.Hour) + 1})
	delete(want, "moved")
	check("past the retention", want)
	assert.False(t, f.Reclaimable(at(10*365*24*time.Hour)), "the one record left belongs to an assigned client")
	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(10 * 365 * 24 * time.Hour)})
	check("ten years on, kept still has its assignment", want)
	apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "kept", Audited: by("ops", at(10*365*24*time.Hour))})
	assert.False(t, f.Reclaimable(at(10*365*24*time.Hour+29*24*time.Hour)), "unassigned, its record starts its retention")
	assert.True(t, f.Reclaimable(at(10*365*24*time.Hour+31*24*time.Hour)))
}

// Who made a change is bounded like a token's name, and a change is not
// stamped before the epoch: an entry that breaks either is refused by
// every replica and changes nothing.
func TestAuditedEntriesAreValidated(t *testing.T) {
	long := strings.Repeat("a", fsm.MaxActorLen+1)
	for _, c := range []fsm.Command{
		fsm.SetTier{Client: "a", Tier: "pro", Audited: by(long, at(0))},
		fsm.SetTier{Client: "a", Tier: "pro", Audited: by("ops", -1)},
		fsm.ResetClient{Client: "a", Audited: by(long, at(0))},
		fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: policy(1, 1), Audited: by(long, at(0))},
	} {
		f := newFSM(t, fsm.Options{Default: policy(5, 0)})
		before := f.MarshalSnapshot()
		res := f.ApplyCommand(fsm.Encode(c))
		rej, ok := res.(*fsm.Rejected)
		require.True(t, ok, "%+v: got %T", c, res)
		assert.ErrorIs(t, rej.Err, fsm.ErrInvalidCommand)
		assert.Equal(t, before, f.MarshalSnapshot(), "%+v changed the state", c)
		_, err := fsm.Decode(fsm.Encode(c))
		assert.ErrorIs(t, err, fsm.ErrInvalidCommand, "Decode(%+v)", c)
	}
	ok := fsm.SetTier{Client: "a", Tier: "pro", Audited: by(strings.Repeat("a", fsm.MaxActorLen), at(0))}
	c, err := fsm.Decode(fsm.Encode(ok))
	require.NoError(t, err)
	assert.Equal(t, ok, c, "an actor of the longest name round-trips")
	assert.Equal(t, fsm.TypeSetTierV2, c.Type())
	assert.Equal(t, fsm.TypeSetTier, fsm.SetTier{Client: "a"}.Type(), "an unaudited assignment is written as v0.14.0 reads it")
}

// StateBytes counts the records as the heap holds them.
func TestStateBytesCountsRecords(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, bucket.Scale)})
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.ClusterVersionAudit})
	const n = 50_000
	before, bytesBefore := liveHeap(), f.StateBytes()
	cmds := make([]fsm.Command, 0, n)
	for i := range n {
		cmds = append(cmds, fsm.ResetClient{Client: fmt.Sprintf("%064d", i), Audited: by("deploy-bot", at(time.Duration(i)))})
	}
	for _, c := range cmds {
		f.ApplyCommand(fsm.Encode(c))
	}
	cmds = nil
	grew := float64(liveHeap() - before)
	est := float64(f.StateBytes() - bytesBefore)
	t.Logf("heap grew %.0f bytes a record, StateBytes says %.0f", grew/n, est/n)
	assert.InDelta(t, 1, est/grew, 0.3, "StateBytes %.0f, heap grew %.0f", est, grew)
	runtime.KeepAlive(f)
}

// Below ClusterVersionAudit a group records nothing, even for an entry
// that carries an actor: its snapshots (format 2) could not hold it, and a
// replica restored from one would hold another trail than the others.
func TestNothingIsRecordedBelowTheAuditVersion(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, 0)})
	op := setTierOp("free", policy(10, 0))
	op.Audited = by("ops", at(0))
	apply[*fsm.ConfigResult](t, f, op)
	apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "a", Tier: "free", Audited: by("ops", at(0))})
	assert.Empty(t, f.Audit(0, 10).Entries)
	_, ok := f.Record("a")
	assert.False(t, ok)
}
