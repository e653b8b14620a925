package fsm_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

func window(limit int64, d time.Duration) bucket.Policy {
	return bucket.Policy{Algorithm: bucket.SlidingWindow, Capacity: limit, Window: int64(d)}
}

// What v0.14.0 can say is written as v0.14.0 writes it; anything of the
// newer policies takes the types only cluster version 2 may commit.
func TestPolicyEntriesKeepTheOldTypesWhenTheyCan(t *testing.T) {
	plain := setTierOp("pro", policy(5, bucket.Scale))
	assert.Equal(t, fsm.TypeConfigOp, plain.Type())
	fill := plain
	fill.OnRaise = bucket.Fill
	assert.Equal(t, fsm.TypeConfigOpV2, fill.Type())
	shadow := setTierOp("pro", bucket.Policy{Capacity: 5, Rate: 1, Mode: bucket.Shadow})
	assert.Equal(t, fsm.TypeConfigOpV2, shadow.Type())
	cfg := bucket.Config{Version: 3, Default: policy(5, 1), Tiers: map[string]bucket.Policy{"w": window(10, time.Minute)}}
	assert.Equal(t, fsm.TypeInstallConfigPolicies, fsm.InstallConfig{Config: cfg}.Type())
	assert.Equal(t, fsm.TypeInstallConfig, fsm.InstallConfig{Config: bucket.Config{Version: 3, Default: policy(5, 1)}}.Type())

	for _, c := range []fsm.Command{plain, fill, shadow, fsm.InstallConfig{Config: cfg}} {
		got, err := fsm.Decode(fsm.Encode(c))
		require.NoError(t, err, "%+v", c)
		if ic, ok := got.(fsm.InstallConfig); ok {
			assert.True(t, cfg.Equal(ic.Config), "install round trip")
			continue
		}
		assert.Equal(t, c, got, "round trip")
	}
	bad := fsm.Encode(fill)
	bad[len(bad)-1] = 2 // on_raise 2
	_, err := fsm.Decode(bad)
	assert.ErrorIs(t, err, fsm.ErrMalformed)
}

// A raise with fill refills the tier's clients once, at the change's
// position; a repeat fills nothing; a client moved in later keeps its own
// state; a group that installs the configuration late, skipping versions,
// fills once too.
func TestFillOnRaiseFillsOnce(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(100, 0)})
	apply[*fsm.ConfigResult](t, f, setTierOp("pro", policy(10, 0)))
	for _, c := range []string{"a", "b", "late"} {
		apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: c, Tier: "pro"})
	}
	apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "late", Tier: ""})
	for _, c := range []string{"a", "b", "late"} {
		allowOne(t, f, at(0), fsm.AllowRequest{Client: c, Cost: 8})
	}
	raise := setTierOp("pro", policy(20, 0))
	raise.OnRaise = bucket.Fill
	res := apply[*fsm.ConfigResult](t, f, raise)
	require.NoError(t, res.Err)
	assert.False(t, f.Known("a"), "a is filled: its state is gone")
	assert.Equal(t, int64(20), f.View("a", at(0)).Decision.RemainingTokens())
	assert.Equal(t, int64(92), f.View("late", at(0)).Decision.RemainingTokens(), "not in the tier: not filled")

	allowOne(t, f, at(time.Second), fsm.AllowRequest{Client: "a", Cost: 15})
	apply[*fsm.ConfigResult](t, f, raise) // the same change again (a retry)
	assert.Equal(t, int64(5), f.View("a", at(time.Second)).Decision.RemainingTokens(), "a repeat fills nothing")
	apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "late", Tier: "pro"})
	assert.Equal(t, int64(20), f.View("late", at(time.Second)).Decision.RemainingTokens(), "moved in after the fill: clamped, not filled")

	// A data group that was at version 1 and installs version 4 at once
	// fills the tier once.
	g := newFSM(t, fsm.Options{Default: policy(100, 0)})
	apply[*fsm.ConfigResult](t, g, fsm.InstallConfig{Config: bucket.Config{Version: 1, Default: policy(100, 0), Tiers: map[string]bucket.Policy{"pro": policy(10, 0)}}})
	apply[*fsm.SetTierResult](t, g, fsm.SetTier{Client: "a", Tier: "pro"})
	allowOne(t, g, at(0), fsm.AllowRequest{Client: "a", Cost: 8})
	apply[*fsm.ConfigResult](t, g, fsm.InstallConfig{Config: f.Config()})
	assert.Equal(t, int64(20), g.View("a", at(0)).Decision.RemainingTokens(), "filled at the late install")
	allowOne(t, g, at(0), fsm.AllowRequest{Client: "a", Cost: 8})
	next := f.Config()
	next.Version++
	apply[*fsm.ConfigResult](t, g, fsm.InstallConfig{Config: next})
	assert.Equal(t, int64(12), g.View("a", at(0)).Decision.RemainingTokens(), "the next install does not fill again")
}

// Shadow mode decides and records exactly as enforce would; only the
// answer differs (the caller is told it was allowed).
func TestShadowDecidesAsEnforceWould(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: bucket.Policy{Capacity: 2, Mode: bucket.Shadow}})
	var got []bool
	for range 3 {
		d := allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1})
		assert.True(t, d.Shadow)
		got = append(got, d.Allowed)
	}
	assert.Equal(t, []bool{true, true, false}, got, "what enforcing would answer")
	assert.Zero(t, f.View("a", at(0)).Decision.RemainingTokens())
}

// A snapshot taken while windows keep deciding holds the windows as they
// were: later decisions append beyond what it holds.
func TestSnapshotOfWindowsIsAPointInTime(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: window(1000, time.Hour)})
	apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: fsm.MaxClusterVersion})
	for i := range 200 {
		allowOne(t, f, at(time.Duration(i)*time.Millisecond), fsm.AllowRequest{Client: "a", Cost: 1})
	}
	want := f.MarshalSnapshot()
	snap, err := f.Snapshot()
	require.NoError(t, err)
	for i := range 500 {
		allowOne(t, f, at(time.Second+time.Duration(i)*time.Millisecond), fsm.AllowRequest{Client: "a", Cost: 1})
	}
	sink := &memSink{}
	require.NoError(t, snap.Persist(sink))
	snap.Release()
	assert.Equal(t, want, sink.buf.Bytes(), "the snapshot changed after it was taken")

	g := newFSM(t, fsm.Options{Default: window(1000, time.Hour)})
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(want))))
	assert.Equal(t, int64(800), g.View("a", at(time.Second)).Decision.RemainingTokens())
}

// Changing a tier's algorithm converts its clients at once: each keeps what
// it had left and no more than the new policy allows.
func TestAlgorithmChangeConvertsClients(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(10, 0)})
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 7})
	apply[*fsm.ConfigResult](t, f, fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: window(5, time.Minute)})
	v := f.View("a", at(0))
	assert.Equal(t, int64(3), v.Decision.RemainingTokens(), "3 left, under a limit of 5")
	assert.Equal(t, time.Minute, time.Duration(v.Decision.ResetAfter), "the used part counts from the change")
	apply[*fsm.ConfigResult](t, f, fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: policy(100, 0)})
	assert.Equal(t, int64(3), f.View("a", at(0)).Decision.RemainingTokens(), "and back: still 3")
}
