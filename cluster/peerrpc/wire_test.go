package peerrpc

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

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
			{Decision: bucket.Decision{Limit: 1, RetryAfter: 9}, Tier: "default", Stamp: 78, MaybeDuplicate: true, Rate: bucket.Scale / 3, RateKnown: true},
			{Decision: bucket.Decision{Allowed: true, Limit: 2, ResetAfter: -1}, Tier: "default", Stamp: 78, RateKnown: true}, // rate 0, known
			{Decision: bucket.Decision{Limit: 3}, Tier: "big", Stamp: 78, Rate: bucket.MaxRate, RateKnown: true},
			{Unresolved: true, Stamp: 79},
			{Decision: bucket.Decision{Limit: 10, RetryAfter: 5}, Tier: "minute", Stamp: 80, RateKnown: true, Window: 60 * bucket.Second, Shadow: true},
		}},
		{Error: &Error{Code: "outcome_unknown", Message: "lost"}},
		{Decisions: []fsm.Decision{}},
	}}
	gotResp, err := DecodeAllowResp(AppendAllowResp(nil, resp, true))
	require.NoError(t, err)
	assert.Equal(t, resp, gotResp, "with rates")

	gotResp, err = DecodeAllowResp(AppendAllowResp(nil, resp, false))
	require.NoError(t, err)
	assert.Equal(t, withoutRates(resp), gotResp, "without rates every decision is one whose rate is not known")
}

// withoutRates is resp with no decision knowing its rate, window or
// shadow mode: what the format of cluster version 1 carries.
func withoutRates(resp AllowResp) AllowResp {
	out := AllowResp{Items: make([]AllowResult, len(resp.Items))}
	for i, it := range resp.Items {
		out.Items[i] = it
		if it.Decisions != nil {
			out.Items[i].Decisions = make([]fsm.Decision, len(it.Decisions))
			for j, d := range it.Decisions {
				d.Rate, d.RateKnown, d.Window, d.Shadow = 0, false, 0, false
				out.Items[i].Decisions[j] = d
			}
		}
	}
	return out
}

// Without rates (cluster version 1) the answer is byte for byte what
// v0.14.0 writes, whatever the decisions know, so a node of that release
// reads it; with rates, only decisions that know one change, by the flag
// bit and the rate after the origin. The golden bytes are v0.14.0's
// encoding of the same answer.
func TestAllowWireWithoutRatesIsTheReleasedLayout(t *testing.T) {
	resp := AllowResp{Items: []AllowResult{
		{Decisions: []fsm.Decision{
			{Decision: bucket.Decision{Allowed: true, Remaining: 4 * bucket.Scale, Limit: 5, ResetAfter: 1_000_000_000}, Tier: "free", Stamp: 77, Origin: 12, Rate: bucket.Scale, RateKnown: true},
			{Decision: bucket.Decision{Limit: 1, RetryAfter: bucket.Never, ResetAfter: bucket.Never}, Tier: "default", Stamp: 78, Duplicate: true, MaybeDuplicate: true, RateKnown: true},
			{Unresolved: true, Stamp: 79},
		}},
		{Error: &Error{Code: "outcome_unknown", Message: "lost"}},
	}}
	const released = "010200030180a0d9e61d0a0080a8d6b90704667265659a010c06000201010764656661756c749c01000800000000009e0100010f6f7574636f6d655f756e6b6e6f776e046c6f7374"
	assert.Equal(t, released, hex.EncodeToString(AppendAllowResp(nil, resp, false)))
	assert.Equal(t, released, hex.EncodeToString(AppendAllowResp(nil, withoutRates(resp), true)), "decisions without a rate are written as before")

	with := AppendAllowResp(nil, resp, true)
	want, err := hex.DecodeString(released)
	require.NoError(t, err)
	// In the released bytes decision 0 is the 21 bytes from offset 4 and
	// decision 1 the 16 after them: each gains the flag bit, and its rate
	// after its origin (decision 1's is 0, one byte).
	const d0, d0Len, d1Len = 4, 21, 16
	rate0 := binary.AppendVarint(nil, bucket.Scale)
	want[d0] |= wireRate
	want = slices.Insert(want, d0+d0Len, rate0...)
	d1 := d0 + d0Len + len(rate0)
	want[d1] |= wireRate
	want = slices.Insert(want, d1+d1Len, 0)
	assert.Equal(t, hex.EncodeToString(want), hex.EncodeToString(with))
}

// A rate outside what a policy can have does not decode.
func TestAllowWireRefusesImpossibleRates(t *testing.T) {
	for _, rate := range []int64{-1, bucket.MaxRate + 1} {
		data := AppendAllowResp(nil, AllowResp{Items: []AllowResult{{Decisions: []fsm.Decision{{Tier: "x", Rate: rate, RateKnown: true}}}}}, true)
		_, err := DecodeAllowResp(data)
		assert.Error(t, err, "rate %d", rate)
	}
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
	f.Add(AppendAllowResp(nil, AllowResp{Items: []AllowResult{{Decisions: []fsm.Decision{{Tier: "x"}}}, {Error: &Error{Code: "c"}}}}, false))
	f.Add(AppendAllowResp(nil, AllowResp{Items: []AllowResult{{Decisions: []fsm.Decision{{Tier: "x", Rate: 7, RateKnown: true}, {Tier: "y"}}}}}, true))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Never panics; what decodes encodes back to the same bytes.
		if req, err := DecodeAllowReq(data); err == nil {
			again, err := DecodeAllowReq(AppendAllowReq(nil, req))
			require.NoError(t, err)
			require.Equal(t, req, again)
		}
		if resp, err := DecodeAllowResp(data); err == nil {
			again, err := DecodeAllowResp(AppendAllowResp(nil, resp, true))
			require.NoError(t, err)
			require.Equal(t, resp, again)
			again, err = DecodeAllowResp(AppendAllowResp(nil, resp, false))
			require.NoError(t, err)
			require.Equal(t, withoutRates(resp), again)
		}
	})
}

func TestJSONWireTypesRoundTrip(t *testing.T) {
	for _, op := range []fsm.ConfigOp{
		{Kind: fsm.OpSetTier, Tier: "pro", Policy: bucket.Policy{Capacity: 9, Rate: bucket.Scale / 3}},
		{Kind: fsm.OpDeleteTier, Tier: "pro"},
		{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: 1, Rate: 0}},
		{Kind: fsm.OpSetTier, Tier: "pro", Policy: bucket.Policy{Capacity: 9}, OnRaise: bucket.Fill, Audited: fsm.Audited{Actor: "ops"}},
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
	v.Record = fsm.ClientRecord{Assigned: fsm.Act{At: 5, By: "ops"}, AssignedTier: "pro", Reset: fsm.Act{At: 6, By: fsm.Anonymous}}
	assert.Equal(t, v, roundTrip(t, ToWireClientView(v)).View(), "with its record")

	window := bucket.Policy{Algorithm: bucket.SlidingWindow, Capacity: 60, Window: 60 * bucket.Second, Mode: bucket.Shadow}
	page := fsm.AuditPage{Entries: []fsm.AuditEntry{
		{Version: 3, Act: fsm.Act{At: 10, By: "ops"}, Kind: fsm.OpSetTier, Tier: "pro", After: &window, OnRaise: bucket.Fill},
		{Version: 4, Act: fsm.Act{At: 11, By: "anonymous"}, Kind: fsm.OpDeleteTier, Tier: "pro", Before: &window},
		{Version: 5, Act: fsm.Act{At: 12, By: "ops"}, Kind: fsm.OpSetDefault, Before: &cfg.Default, After: &cfg.Default},
	}, More: true, Oldest: 2}
	got, err := roundTrip(t, ToWireAuditPage(page)).Page()
	require.NoError(t, err)
	assert.Equal(t, page, got)
	_, err = WireAuditPage{Entries: []wireAuditEntry{{Version: 1, Kind: "drop_everything"}}}.Page()
	assert.ErrorIs(t, err, fsm.ErrInvalidCommand)
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
	type entry struct {
		code string
		err  error
	}
	all := slices.Clone(others)
	for _, e := range errs.All {
		all = append(all, entry{e.Wire(), e})
	}
	for _, c := range all {
		got := ToError(fmt.Errorf("group 3: %w", c.err))
		assert.Equal(t, c.code, got.Code)
		if c.code == "shutting_down" {
			assert.ErrorIs(t, got.Err(), errs.ErrNotLeader, "a stopping peer took nothing: retry elsewhere")
			continue
		}
		assert.ErrorIs(t, got.Err(), byWire[c.code], c.code)
		if e, ok := c.err.(*errs.Error); ok {
			assert.ErrorIs(t, got.Err(), e, "the node's own errors come back as themselves")
		}
	}
	assert.ErrorIs(t, (&Error{Code: "from_a_newer_node", Message: "?"}).Err(), errs.ErrOutcomeUnknown, "an unknown code proves nothing")

	// An error is answered as it was classified where it happened, first
	// in its chain: an unknown outcome stays unknown whatever else it
	// wraps (answered as not_leader or shutting_down, the caller would
	// take it for "nothing was done"), and a cause after the
	// classification does not change it.
	for _, c := range all {
		got := ToError(fmt.Errorf("%w: then %w", errs.ErrOutcomeUnknown, c.err))
		assert.Equal(t, "outcome_unknown", got.Code, "unknown, then %s", c.code)
		assert.NotErrorIs(t, got.Err(), errs.ErrNotLeader, "unknown, then %s", c.code)
	}
	got := ToError(fmt.Errorf("%w: group 2: %w", errs.ErrNotLeader, context.DeadlineExceeded))
	assert.Equal(t, "not_leader", got.Code)
}

// The status and configuration answers between nodes keep the JSON the
// released nodes (v0.14.0, whose cluster.GroupStatus and ConfigChange
// crossed as they were) write and read: a rolling upgrade mixes them.
func TestStatusWireIsTheReleasedJSON(t *testing.T) {
	gs := WireGroupStatus{ID: "0", State: "Leader", Leader: "n1", Term: 3, AppliedIndex: 4, CommitIndex: 5,
		LastContact: time.Unix(6, 7).UTC(), Voters: []string{"n1"}, ConfigVersion: 8}
	got, err := json.Marshal(gs)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"0","state":"Leader","leader":"n1","term":3,"applied_index":4,"commit_index":5,
		"last_contact":"1970-01-01T00:00:06.000000007Z","voters":["n1"],"config_version":8}`, string(got))
	got, err = json.Marshal(WireConfigChange{Version: 2, Applied: []string{"0"}, Lagging: []string{"1"}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":2,"applied":["0"],"lagging":["1"]}`, string(got))
}
