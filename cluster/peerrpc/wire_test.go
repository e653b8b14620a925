package peerrpc

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/fsm"
)

func TestAllowWireRoundTrips(t *testing.T) {
	req := AllowReq{Items: []AllowItem{
		{Group: 3, Deadline: 1_700_000_000_123, Requests: []fsm.AllowRequest{
			{Client: "alice", Cost: 2, RequestID: "r-1", Origin: fsm.MakeOrigin(9, 4), Retry: true},
			{Client: "bob", Cost: 0},
		}},
		{Group: 0, Requests: []fsm.AllowRequest{}},
	}}
	got, err := DecodeAllowReq(AppendAllowReq(nil, req))
	require.NoError(t, err)
	assert.Equal(t, req, got)

	resp := AllowResp{Items: []AllowResult{
		{Decisions: []fsm.Decision{
			{Decision: bucket.Decision{Allowed: true, Remaining: 4 * bucket.Scale, Limit: 5, RetryAfter: 0, ResetAfter: -1}, Tier: "free", Stamp: 77, Origin: 12, Duplicate: true},
			{Decision: bucket.Decision{Limit: 1, RetryAfter: 9}, Tier: "default", Stamp: 78, MaybeDuplicate: true},
			{Unresolved: true, Stamp: 79},
		}},
		{Error: &Error{Code: "outcome_unknown", Message: "lost"}},
		{Decisions: []fsm.Decision{}},
	}}
	gotResp, err := DecodeAllowResp(AppendAllowResp(nil, resp))
	require.NoError(t, err)
	assert.Equal(t, resp, gotResp)
}

func TestAllowWireRefusesWhatItCannotRead(t *testing.T) {
	good := AppendAllowReq(nil, AllowReq{Items: []AllowItem{{Group: 1, Requests: []fsm.AllowRequest{{Client: "a", Cost: 1}}}}})
	for name, data := range map[string][]byte{
		"empty":         nil,
		"other version": append([]byte{2}, good[1:]...),
		"truncated":     good[:len(good)-1],
		"trailing":      append(append([]byte{}, good...), 0),
		"bad retry":     append(append([]byte{}, good[:len(good)-1]...), 7),
		"huge count":    {allowWireVersion, 0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		_, err := DecodeAllowReq(data)
		assert.Error(t, err, name)
	}
}

func FuzzDecodeAllowWire(f *testing.F) {
	f.Add(AppendAllowReq(nil, AllowReq{Items: []AllowItem{{Group: 1, Requests: []fsm.AllowRequest{{Client: "a", Cost: 1, Origin: 5}}}}}))
	f.Add(AppendAllowResp(nil, AllowResp{Items: []AllowResult{{Decisions: []fsm.Decision{{Tier: "x"}}}, {Error: &Error{Code: "c"}}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Never panics; what decodes encodes back to the same bytes.
		if req, err := DecodeAllowReq(data); err == nil {
			again, err := DecodeAllowReq(AppendAllowReq(nil, req))
			require.NoError(t, err)
			require.Equal(t, req, again)
		}
		if resp, err := DecodeAllowResp(data); err == nil {
			again, err := DecodeAllowResp(AppendAllowResp(nil, resp))
			require.NoError(t, err)
			require.Equal(t, resp, again)
		}
	})
}

func TestJSONWireTypesRoundTrip(t *testing.T) {
	for _, op := range []fsm.ConfigOp{
		{Kind: fsm.OpSetTier, Tier: "pro", Policy: bucket.Policy{Capacity: 9, Rate: bucket.Scale / 3}},
		{Kind: fsm.OpDeleteTier, Tier: "pro"},
		{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: 1, Rate: 0}},
	} {
		got, err := roundTrip(t, ToWireConfigOp(op)).Op()
		require.NoError(t, err)
		assert.Equal(t, op, got)
	}
	_, err := WireConfigOp{Kind: "drop_everything"}.Op()
	assert.ErrorIs(t, err, fsm.ErrInvalidCommand)

	cfg := bucket.Config{Version: 7, Default: bucket.Policy{Capacity: 5, Rate: bucket.Scale},
		Tiers: map[string]bucket.Policy{"free": {Capacity: 2, Rate: 1}}}
	assert.Equal(t, cfg, roundTrip(t, ToWireConfig(cfg)).Config())

	v := fsm.ClientView{Client: "a", AssignedTier: "gone", Tier: bucket.DefaultTierName, Policy: cfg.Default, Known: true,
		Decision: bucket.Decision{Allowed: true, Remaining: 3, Limit: 5, RetryAfter: 0, ResetAfter: 99}, At: 123}
	assert.Equal(t, v, roundTrip(t, ToWireClientView(v)).View())
}

// roundTrip encodes v as JSON and decodes it again, as a peer would.
func roundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	var out T
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}

// Every error a handler may answer crosses the wire as itself.
func TestRPCErrorsRoundTrip(t *testing.T) {
	for _, c := range codes {
		got := ToError(fmt.Errorf("group 3: %w", c.err)).Err()
		if c.code == "shutting_down" {
			assert.ErrorIs(t, got, errs.ErrNotLeader, "a stopping peer took nothing: retry elsewhere")
			continue
		}
		want := c.err // a code several errors share comes back as the first
		for _, first := range codes {
			if first.code == c.code {
				want = first.err
				break
			}
		}
		assert.ErrorIs(t, got, want, c.code)
	}
	assert.ErrorIs(t, (&Error{Code: "from_a_newer_node", Message: "?"}).Err(), errs.ErrOutcomeUnknown, "an unknown code proves nothing")

	// An unknown outcome stays unknown whatever else it wraps: answered as
	// not_leader or shutting_down, the caller would take it for "nothing
	// was done".
	for _, c := range codes {
		got := ToError(fmt.Errorf("%w: then %w", errs.ErrOutcomeUnknown, c.err))
		assert.Equal(t, "outcome_unknown", got.Code, "unknown, then %s", c.code)
		assert.NotErrorIs(t, got.Err(), errs.ErrNotLeader, "unknown, then %s", c.code)
	}
}
