package fsm_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// rateOf is the part of a Decision these tests check.
type rateOf struct {
	Rate      int64
	RateKnown bool
	Duplicate bool
}

func rateOfDecision(d fsm.Decision) rateOf { return rateOf{d.Rate, d.RateKnown, d.Duplicate} }

// Every fresh decision carries the rate of the policy that decided it, a
// rate of 0 included (known, not missing). A duplicate answers the rate
// remembered with the decision, not the policy's rate now; at the base
// cluster version the memory keeps none (format 2 snapshots cannot hold
// it), so a duplicate does not know it there.
func TestDecisionCarriesItsPolicysRate(t *testing.T) {
	half, three := int64(bucket.Scale/2), int64(3*bucket.Scale)
	o := fsm.MakeOrigin(4, 1)
	for _, c := range []struct {
		version    uint32
		remembered rateOf // what a duplicate of the pro client's first decision says
	}{
		{fsm.BaseClusterVersion, rateOf{Duplicate: true}},
		{fsm.ClusterVersionOriginsAlways, rateOf{half, true, true}},
	} {
		f := newFSM(t, fsm.Options{Default: policy(5, 0)})
		if c.version > fsm.BaseClusterVersion {
			apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: c.version})
		}
		apply[*fsm.ConfigResult](t, f, setTierOp("pro", policy(10, half)))
		apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "p", Tier: "pro"})

		steps := []struct {
			cmd  fsm.Command // applied before the request, if set
			req  fsm.AllowRequest
			want rateOf
		}{
			{req: fsm.AllowRequest{Client: "d", Cost: 1}, want: rateOf{0, true, false}},
			{req: fsm.AllowRequest{Client: "p", Cost: 1, RequestID: "r1"}, want: rateOf{half, true, false}},
			{req: fsm.AllowRequest{Client: "p", Cost: 1, Origin: o}, want: rateOf{half, true, false}},
			{cmd: setTierOp("pro", policy(10, three)), req: fsm.AllowRequest{Client: "p", Cost: 1, RequestID: "r1"}, want: c.remembered},
			{req: fsm.AllowRequest{Client: "p", Cost: 1, Origin: o, Retry: true}, want: c.remembered},
			{req: fsm.AllowRequest{Client: "p", Cost: 1}, want: rateOf{three, true, false}},
			{req: fsm.AllowRequest{Client: "d", Cost: 9, RequestID: "r2"}, want: rateOf{0, true, false}},
		}
		for i, st := range steps {
			if st.cmd != nil {
				apply[*fsm.ConfigResult](t, f, st.cmd)
			}
			got := rateOfDecision(allowOne(t, f, at(0), st.req))
			assert.Equal(t, st.want, got, "cluster version %d, step %d: allow(%+v) = %+v, want %+v", c.version, i, st.req, got, st.want)
		}
	}
}

func TestUnresolvedDecisionKnowsNoRate(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, bucket.Scale), OriginDedupMax: 1})
	o := fsm.MakeOrigin(9, 100)
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o + 1})
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o + 2}) // forgets o+1
	d := allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: o + 1, Retry: true})
	require.True(t, d.Unresolved)
	assert.False(t, d.RateKnown, "nothing was decided, by no policy")
}

// A format 3 snapshot keeps the rate of every remembered decision, by
// request id and by origin, a rate of 0 included; a replica restored from
// one answers duplicates as the replica it came from.
func TestSnapshotKeepsTheRateOfRememberedDecisions(t *testing.T) {
	half := int64(bucket.Scale / 2)
	o := fsm.MakeOrigin(4, 1)
	reqs := []fsm.AllowRequest{
		{Client: "p", Cost: 1, RequestID: "r1"},
		{Client: "d", Cost: 1, RequestID: "r2"},
		{Client: "p", Cost: 1, Origin: o},
	}
	for _, c := range []struct {
		version uint32
		format  byte
		known   bool
	}{
		{fsm.BaseClusterVersion, 2, false},
		{fsm.ClusterVersionOriginsAlways, 3, true},
	} {
		f := newFSM(t, fsm.Options{Default: policy(5, 0)})
		if c.version > fsm.BaseClusterVersion {
			apply[*fsm.ClusterVersionResult](t, f, fsm.SetClusterVersion{Version: c.version})
		}
		apply[*fsm.ConfigResult](t, f, setTierOp("pro", policy(10, half)))
		apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "p", Tier: "pro"})
		for _, r := range reqs {
			require.True(t, allowOne(t, f, at(0), r).RateKnown)
		}
		snap := f.MarshalSnapshot()
		require.Equal(t, c.format, snap[len("QRSNAP")])

		g := newFSM(t, fsm.Options{Default: policy(5, 0)})
		require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(snap))))
		assert.Equal(t, snap, g.MarshalSnapshot(), "format %d round-trips", c.format)
		for i, r := range reqs {
			r.Retry = r.RequestID == ""
			want := allowOne(t, f, at(0), r)
			got := allowOne(t, g, at(0), r)
			require.True(t, got.Duplicate, "format %d, request %d", c.format, i)
			assert.Equal(t, want, got, "format %d, request %d: the restored replica answers as its source", c.format, i)
			assert.Equal(t, c.known, got.RateKnown, "format %d, request %d", c.format, i)
		}
		if c.known {
			assert.Equal(t, half, allowOne(t, g, at(0), fsm.AllowRequest{Client: "p", Cost: 1, RequestID: "r1"}).Rate)
			assert.Equal(t, int64(0), allowOne(t, g, at(0), fsm.AllowRequest{Client: "d", Cost: 1, RequestID: "r2"}).Rate)
		}
	}
}
