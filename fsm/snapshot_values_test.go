package fsm

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/internal/binenc"
)

// Restore checks the values a snapshot holds, not only its format, and on
// refusal leaves the state as it was.
func TestRestoreRefusesImpossibleValues(t *testing.T) {
	valid := func() *snapshot {
		cfg, err := bucket.NewConfig(bucket.BuiltinDefault)
		require.NoError(t, err)
		cfg.Version = 1
		return &snapshot{
			applied:   10,
			highWater: 5_000,
			config:    cfg,
			tiers:     frozenTiersOf(map[string]string{"alice": "free"}),
			buckets:   frozenMap[bucket.State]{{"alice": {Tokens: 3 * bucket.Scale, Carry: 7, Last: 4_000}}},
			idRecords: []idRecord{
				named("alice", "r1", Decision{Decision: bucket.Decision{Allowed: true}, Tier: "free", Stamp: 3_000}),
				named("alice", "r2", Decision{Decision: bucket.Decision{Allowed: true}, Tier: "free", Stamp: 4_000}),
			},
			byOrigin: []dedupEntry{
				{key: dedupKey{client: "bob", origin: MakeOrigin(7, 9)}, decision: Decision{Tier: "default", Stamp: 4_100, Origin: MakeOrigin(7, 9)}},
			},
			marks: map[uint32]originMark{7: {seq: 3, at: 4_000}},
		}
	}
	tests := map[string]func(s *snapshot){
		"balance above any capacity": func(s *snapshot) {
			s.buckets[0]["alice"] = bucket.State{Tokens: bucket.MaxCapacity*bucket.Scale + 1, Last: 4_000}
		},
		"negative balance":         func(s *snapshot) { s.buckets[0]["alice"] = bucket.State{Tokens: -1, Last: 4_000} },
		"carry of a whole token":   func(s *snapshot) { s.buckets[0]["alice"] = bucket.State{Tokens: 1, Carry: bucket.Scale, Last: 4_000} },
		"decision after the group": func(s *snapshot) { s.buckets[0]["alice"] = bucket.State{Tokens: 1, Last: 6_000} },
		"request id twice": func(s *snapshot) {
			s.idRecords = append(s.idRecords, named("alice", "r1", Decision{Stamp: 4_500}))
		},
		"request id digest twice": func(s *snapshot) {
			s.clusterVersion = ClusterVersionIDMemory // format 4, which holds digests
			s.idRecords = append(s.idRecords, named("alice", "r1", Decision{Stamp: 4_500}))
		},
		"request ids out of order": func(s *snapshot) { s.idRecords[0], s.idRecords[1] = s.idRecords[1], s.idRecords[0] },
		"empty request id":         func(s *snapshot) { s.idRecords[0].id = "" },
		"origin with sequence 0":   func(s *snapshot) { s.byOrigin[0].decision.Origin = MakeOrigin(7, 0) },
		"origin entry after group": func(s *snapshot) { s.byOrigin[0].decision.Stamp = 6_000 },
		"mark after the group":     func(s *snapshot) { s.marks[7] = originMark{seq: 3, at: 6_000} },
		"invalid default":          func(s *snapshot) { s.config.Default = bucket.Policy{Capacity: 0, Rate: 1} },
		"over-long tier name": func(s *snapshot) {
			s.tiers = frozenTiersOf(map[string]string{"alice": strings.Repeat("t", bucket.MaxTierNameLen+1)})
		},
		"rate above any policy": func(s *snapshot) {
			s.clusterVersion = ClusterVersionOriginsAlways // format 3, which holds rates
			s.idRecords[0].decision.Rate, s.idRecords[0].decision.RateKnown = bucket.MaxRate+1, true
		},
		"negative rate": func(s *snapshot) {
			s.clusterVersion = ClusterVersionOriginsAlways
			s.byOrigin[0].decision.Rate, s.byOrigin[0].decision.RateKnown = -1, true
		},
	}

	var good bytes.Buffer
	require.NoError(t, valid().writeTo(&good))
	f, err := New(Options{})
	require.NoError(t, err)
	require.NoError(t, f.Restore(io.NopCloser(bytes.NewReader(good.Bytes()))), "the valid snapshot restores")
	before := f.MarshalSnapshot()

	for name, mutate := range tests {
		s := valid()
		mutate(s)
		var buf bytes.Buffer
		require.NoError(t, s.writeTo(&buf), name)
		err := f.Restore(io.NopCloser(bytes.NewReader(buf.Bytes())))
		assert.ErrorIs(t, err, ErrBadSnapshot, name)
		assert.Equal(t, before, f.MarshalSnapshot(), "%s: a refused restore changed the state", name)
	}
}

// named is a record that keeps its client and request id, as below
// ClusterVersionIDMemory.
func named(client, id string, d Decision) idRecord {
	return idRecord{digest: digestOf(client, id), named: true, client: client, id: id, decision: d}
}

// A remembered decision's rate is written only in format 3, behind a flag
// bit; format 2 reads back as "rate not known", and format 3 refuses flag
// bits it does not know.
func TestRememberedDecisionFormats(t *testing.T) {
	d := Decision{Decision: bucket.Decision{Allowed: true, Remaining: 3, Limit: 5, ResetAfter: 7}, Tier: "free", Stamp: 9, Origin: MakeOrigin(1, 2)}
	read := func(data []byte, format byte) (Decision, error) {
		r := &reader{binenc.Reader{B: data}}
		got := r.decision(format)
		return got, r.End()
	}
	for _, c := range []struct {
		name   string
		rate   int64
		known  bool
		format byte
		want   Decision
	}{
		{"format 2 drops the rate", bucket.Scale, true, 2, d},
		{"format 3 keeps it", bucket.Scale, true, 3, Decision{Decision: d.Decision, Tier: d.Tier, Stamp: d.Stamp, Origin: d.Origin, Rate: bucket.Scale, RateKnown: true}},
		{"format 3 keeps a rate of 0", 0, true, 3, Decision{Decision: d.Decision, Tier: d.Tier, Stamp: d.Stamp, Origin: d.Origin, RateKnown: true}},
		{"format 3 without a rate", 0, false, 3, d},
	} {
		in := d
		in.Rate, in.RateKnown = c.rate, c.known
		got, err := read(appendDecision(nil, in, c.format), c.format)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
	assert.Equal(t, appendDecision(nil, d, 2), appendDecision(nil, Decision{Decision: d.Decision, Tier: d.Tier, Stamp: d.Stamp, Origin: d.Origin, Rate: 5, RateKnown: true}, 2),
		"format 2 is the release before's, rate or not")

	odd := appendDecision(nil, d, 3)
	odd[0] |= 1 << 4
	_, err := read(odd, 3)
	assert.Error(t, err, "format 3: an unknown flag bit")
}
