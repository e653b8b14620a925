package fsm_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

var (
	maxClient = strings.Repeat("c", fsm.MaxClientLen)
	maxID     = strings.Repeat("i", fsm.MaxRequestIDLen)
	maxTier   = strings.Repeat("t", bucket.MaxTierNameLen)
)

// validCommands has one or more commands of every type, at the edges of what
// the encoding allows. Decode(Encode(c)) must give c back.
var validCommands = []struct {
	name string
	cmd  fsm.Command
}{
	{"allow empty", fsm.Allow{Stamp: 0, Requests: []fsm.AllowRequest{}}},
	{"allow one", fsm.Allow{Stamp: t0, Requests: []fsm.AllowRequest{{Client: "alice", Cost: 1}}}},
	{"allow batch", fsm.Allow{Stamp: -t0, Requests: []fsm.AllowRequest{
		{Client: "a", Cost: 0, RequestID: "r1"},
		{Client: "a", Cost: 1, RequestID: "r1"},
		{Client: "ü\x00\xff", Cost: 300},
		{Client: maxClient, Cost: bucket.MaxCost, RequestID: maxID},
	}}},
	{"allow min stamp", fsm.Allow{Stamp: math.MinInt64, Requests: []fsm.AllowRequest{{Client: "x"}}}},
	{"allow max stamp", fsm.Allow{Stamp: math.MaxInt64, Requests: []fsm.AllowRequest{{Client: "x"}}}},
	{"set tier op", setTierOp("free", policy(5, bucket.Scale))},
	{"set tier op max", setTierOp(maxTier, policy(bucket.MaxCapacity, bucket.MaxRate))},
	// The decoder does not judge names or policies in a ConfigOp: the FSM
	// refuses them with a result, identically on every replica.
	{"set tier op invalid", setTierOp("Not Valid", policy(-1, math.MinInt64))},
	{"delete tier op", fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "pro"}},
	{"set default op", fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: policy(10, 1)}},
	{"install empty", fsm.InstallConfig{Config: bucket.Config{Version: 1, Default: policy(1, 0), Tiers: map[string]bucket.Policy{}}}},
	{"install", fsm.InstallConfig{Config: bucket.Config{Version: math.MaxUint64, Default: bucket.BuiltinDefault, Tiers: map[string]bucket.Policy{
		"free": policy(5, bucket.Scale), "pro": policy(100, 10*bucket.Scale), "broken": policy(0, -1), maxTier: policy(1, 0),
	}}}},
	{"set tier", fsm.SetTier{Client: "alice", Tier: "pro"}},
	{"set tier max", fsm.SetTier{Client: maxClient, Tier: maxTier}},
	{"unset tier", fsm.SetTier{Client: "alice"}},
	{"reset client", fsm.ResetClient{Client: "alice"}},
	{"reset client max", fsm.ResetClient{Client: maxClient}},
	{"reclaim", fsm.Reclaim{Stamp: t0}},
	{"reclaim zero", fsm.Reclaim{}},
	{"reclaim min", fsm.Reclaim{Stamp: math.MinInt64}},
	{"set cluster version", fsm.SetClusterVersion{Version: fsm.ClusterVersionOriginsAlways}},
	{"allocate epoch", fsm.AllocateEpoch{}},
}

func TestCommandRoundTrip(t *testing.T) {
	for _, tt := range validCommands {
		b := fsm.Encode(tt.cmd)
		require.GreaterOrEqual(t, len(b), 2, tt.name)
		assert.Equal(t, fsm.EnvelopeVersion, b[0], "%s: envelope", tt.name)
		assert.Equal(t, byte(tt.cmd.Type()), b[1], "%s: type byte", tt.name)

		got, err := fsm.Decode(b)
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.cmd, got, "%s: Decode(Encode(c))", tt.name)
		assert.Equal(t, b, fsm.Encode(got), "%s: Encode(Decode(b))", tt.name)

		prefix := []byte("prefix")
		assert.Equal(t, append(bytes.Clone(prefix), b...), fsm.AppendCommand(prefix, tt.cmd), "%s: AppendCommand", tt.name)
	}
}

func TestMaxBatchDecodes(t *testing.T) {
	a := fsm.Allow{Stamp: t0, Requests: make([]fsm.AllowRequest, fsm.MaxBatch)}
	for i := range a.Requests {
		a.Requests[i] = fsm.AllowRequest{Client: "a", Cost: 1}
	}
	got, err := fsm.Decode(fsm.Encode(a))
	require.NoError(t, err)
	assert.Len(t, got.(fsm.Allow).Requests, fsm.MaxBatch)

	a.Requests = append(a.Requests, fsm.AllowRequest{Client: "a", Cost: 1})
	_, err = fsm.Decode(fsm.Encode(a))
	assert.ErrorIs(t, err, fsm.ErrMalformed, "one request more than MaxBatch")
}

func TestTypeString(t *testing.T) {
	for typ, want := range map[fsm.Type]string{
		fsm.TypeAllow: "allow", fsm.TypeConfigOp: "config-op", fsm.TypeInstallConfig: "install-config",
		fsm.TypeSetTier: "set-tier", fsm.TypeReclaim: "reclaim", 0: "type(0)", 200: "type(200)",
	} {
		assert.Equal(t, want, typ.String())
	}
}

// Builders for hand-made encodings.
func uv(x uint64) []byte { return binary.AppendUvarint(nil, x) }
func sv(x int64) []byte  { return binary.AppendVarint(nil, x) }
func str(s string) []byte {
	return append(uv(uint64(len(s))), s...)
}
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
func hdr(t fsm.Type) []byte      { return []byte{fsm.EnvelopeVersion, byte(t)} }
func pol(c, r int64) []byte      { return cat(sv(c), sv(r)) }

func TestDecodeErrors(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	allowOf := func(r fsm.AllowRequest) []byte {
		return fsm.Encode(fsm.Allow{Stamp: 1, Requests: []fsm.AllowRequest{r}})
	}
	install := func(c bucket.Config) []byte { return fsm.Encode(fsm.InstallConfig{Config: c}) }
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"nil", nil, fsm.ErrMalformed},
		{"empty", []byte{}, fsm.ErrMalformed},
		{"one byte", []byte{fsm.EnvelopeVersion}, fsm.ErrMalformed},
		{"envelope 0", []byte{0, byte(fsm.TypeReclaim), 0}, fsm.ErrUnknownCommand},
		{"envelope 2", []byte{2, byte(fsm.TypeReclaim), 0}, fsm.ErrUnknownCommand},
		{"type 0", []byte{fsm.EnvelopeVersion, 0, 0}, fsm.ErrUnknownCommand},
		{"type 13", []byte{fsm.EnvelopeVersion, 13}, fsm.ErrUnknownCommand},
		{"reset client without its client", []byte{fsm.EnvelopeVersion, byte(fsm.TypeResetClient)}, fsm.ErrMalformed},
		{"reset client empty", fsm.Encode(fsm.ResetClient{}), fsm.ErrMalformed},
		{"allocate epoch with a payload", cat(hdr(fsm.TypeAllocateEpoch), []byte{1}), fsm.ErrMalformed},
		{"cluster version 0", cat(hdr(fsm.TypeSetClusterVersion), []byte{0}), fsm.ErrMalformed},
		{"cluster version missing", hdr(fsm.TypeSetClusterVersion), fsm.ErrMalformed},
		{"type 255", []byte{fsm.EnvelopeVersion, 255, 1, 2, 3}, fsm.ErrUnknownCommand},
		{"payload missing", hdr(fsm.TypeReclaim), fsm.ErrMalformed},
		{"varint overflow", cat(hdr(fsm.TypeReclaim), bytes.Repeat([]byte{0xff}, 10), []byte{1}), fsm.ErrMalformed},

		{"client too long", allowOf(fsm.AllowRequest{Client: long(fsm.MaxClientLen + 1)}), fsm.ErrMalformed},
		{"request id too long", allowOf(fsm.AllowRequest{Client: "a", RequestID: long(fsm.MaxRequestIDLen + 1)}), fsm.ErrMalformed},
		{"cost above max", allowOf(fsm.AllowRequest{Client: "a", Cost: bucket.MaxCost + 1}), fsm.ErrMalformed},
		{"negative cost", allowOf(fsm.AllowRequest{Client: "a", Cost: -1}), fsm.ErrMalformed},
		{"empty client", allowOf(fsm.AllowRequest{Client: "", Cost: 1}), fsm.ErrMalformed},
		{"retry without origin", allowOf(fsm.AllowRequest{Client: "a", Cost: 1, Retry: true}), fsm.ErrMalformed},
		{"origin sequence 0", allowOf(fsm.AllowRequest{Client: "a", Cost: 1, Origin: fsm.MakeOrigin(3, 0)}), fsm.ErrMalformed},
		{"request flags 2", cat(hdr(fsm.TypeAllowOrigin), sv(0), uv(1), str("a"), uv(1), str(""), uv(5), []byte{2}), fsm.ErrMalformed},
		{"origin batch count above bytes", cat(hdr(fsm.TypeAllowOrigin), sv(0), uv(2), str("a"), uv(1), str(""), uv(5), []byte{0}), fsm.ErrMalformed},
		{"batch count above bytes", cat(hdr(fsm.TypeAllow), sv(0), uv(1000), str("a"), uv(1), str("")), fsm.ErrMalformed},
		{"batch count huge", cat(hdr(fsm.TypeAllow), sv(0), uv(math.MaxUint64)), fsm.ErrMalformed},
		{"string length huge", cat(hdr(fsm.TypeAllow), sv(0), uv(1), uv(math.MaxUint64), uv(1), str("")), fsm.ErrMalformed},

		{"op kind 0", fsm.Encode(fsm.ConfigOp{Kind: 0, Tier: "free", Policy: policy(1, 1)}), fsm.ErrMalformed},
		{"op kind 4", fsm.Encode(fsm.ConfigOp{Kind: 4, Tier: "free", Policy: policy(1, 1)}), fsm.ErrMalformed},
		{"op tier too long", fsm.Encode(setTierOp(long(bucket.MaxTierNameLen+1), policy(1, 1))), fsm.ErrMalformed},
		{"op policy missing", cat(hdr(fsm.TypeConfigOp), []byte{byte(fsm.OpSetTier)}, str("free")), fsm.ErrMalformed},

		{"install unsorted tiers", cat(hdr(fsm.TypeInstallConfig), uv(1), pol(1, 1), uv(2), str("b"), pol(1, 1), str("a"), pol(1, 1)), fsm.ErrMalformed},
		{"install duplicate tiers", cat(hdr(fsm.TypeInstallConfig), uv(1), pol(1, 1), uv(2), str("a"), pol(1, 1), str("a"), pol(2, 2)), fsm.ErrMalformed},
		{"install tier count above bytes", cat(hdr(fsm.TypeInstallConfig), uv(1), pol(1, 1), uv(50), str("a"), pol(1, 1)), fsm.ErrMalformed},
		{"install invalid default", install(bucket.Config{Version: 1, Default: policy(0, 1)}), fsm.ErrMalformed},
		{"install negative default rate", install(bucket.Config{Version: 1, Default: policy(1, -1)}), fsm.ErrMalformed},
		{"install invalid tier name", install(bucket.Config{Version: 1, Default: policy(1, 1), Tiers: map[string]bucket.Policy{"Pro": policy(1, 1)}}), fsm.ErrMalformed},
		{"install reserved tier name", install(bucket.Config{Version: 1, Default: policy(1, 1), Tiers: map[string]bucket.Policy{bucket.DefaultTierName: policy(1, 1)}}), fsm.ErrMalformed},
		{"install tier name too long", install(bucket.Config{Version: 1, Default: policy(1, 1), Tiers: map[string]bucket.Policy{long(bucket.MaxTierNameLen + 1): policy(1, 1)}}), fsm.ErrMalformed},

		{"set tier empty client", fsm.Encode(fsm.SetTier{Client: "", Tier: "pro"}), fsm.ErrMalformed},
		{"set tier client too long", fsm.Encode(fsm.SetTier{Client: long(fsm.MaxClientLen + 1), Tier: "pro"}), fsm.ErrMalformed},
		{"set tier name too long", fsm.Encode(fsm.SetTier{Client: "a", Tier: long(bucket.MaxTierNameLen + 1)}), fsm.ErrMalformed},
	}
	for _, tt := range tests {
		c, err := fsm.Decode(tt.data)
		assert.ErrorIs(t, err, tt.want, "Decode(%s) = %+v, %v", tt.name, c, err)
		assert.Nil(t, c, "Decode(%s) returned a command with an error", tt.name)
	}

	// The hand-made encodings are right: in order, the same bytes decode.
	_, err := fsm.Decode(cat(hdr(fsm.TypeInstallConfig), uv(1), pol(1, 1), uv(2), str("a"), pol(1, 1), str("b"), pol(1, 1)))
	assert.NoError(t, err, "control: sorted tiers")
	_, err = fsm.Decode(cat(hdr(fsm.TypeAllow), sv(0), uv(1), str("a"), uv(1), str("")))
	assert.NoError(t, err, "control: one request")
}

func TestDecodeTruncatedAndTrailing(t *testing.T) {
	for _, tt := range validCommands {
		b := fsm.Encode(tt.cmd)
		for cut := range len(b) {
			c, err := fsm.Decode(b[:cut])
			if !assert.ErrorIs(t, err, fsm.ErrMalformed, "%s cut to %d of %d bytes: got %+v", tt.name, cut, len(b), c) {
				break
			}
		}
		for _, extra := range [][]byte{{0}, {1}, b} {
			_, err := fsm.Decode(cat(b, extra))
			assert.ErrorIs(t, err, fsm.ErrMalformed, "%s with %d trailing bytes", tt.name, len(extra))
		}
	}
}

// FuzzDecode checks that Decode never panics, that it fails only with its
// two sentinels, and that whatever it accepts survives a round trip and can
// be applied without a panic.
//
// Re-encoding does not always give back the input bytes: encoding/binary
// accepts non-minimal varints (0x80 0x00 is 0), so several byte strings
// decode to the same command. That is harmless for replication, since every
// replica decodes the same bytes to the same command, so the check is
// Decode(Encode(c)) == c, Encode is a fixed point, and never longer.
func FuzzDecode(f *testing.F) {
	for _, tt := range validCommands {
		if len(fsm.Encode(tt.cmd)) < 1024 {
			f.Add(fsm.Encode(tt.cmd))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := fsm.Decode(data)
		if err != nil {
			if !errors.Is(err, fsm.ErrMalformed) && !errors.Is(err, fsm.ErrUnknownCommand) {
				t.Fatalf("Decode(%x) error %v wraps neither sentinel", data, err)
			}
			require.Nil(t, c)
			return
		}
		enc := fsm.Encode(c)
		assert.LessOrEqual(t, len(enc), len(data), "re-encoding %+v grew", c)
		c2, err := fsm.Decode(enc)
		require.NoError(t, err, "Decode(Encode(%+v))", c)
		assert.Equal(t, c, c2, "Decode(Encode(c)) != c")
		assert.Equal(t, enc, fsm.Encode(c2), "Encode is not a fixed point")

		m, err := fsm.New(fsm.Options{})
		require.NoError(t, err)
		assert.NotPanics(t, func() {
			m.ApplyCommand(data)
			m.ApplyCommand(fsm.Encode(fsm.SetTier{Client: "a", Tier: "pro"}))
			m.ApplyCommand(fsm.Encode(fsm.Allow{Stamp: t0, Requests: []fsm.AllowRequest{{Client: "a", Cost: 1}, {Client: "b", Cost: 2}}}))
			m.ApplyCommand(fsm.Encode(fsm.Reclaim{Stamp: t0 + 1}))
			m.MarshalSnapshot()
		}, "applying %+v", c)
	})
}
