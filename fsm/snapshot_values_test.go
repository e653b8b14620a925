package fsm

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
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
			tiers:     frozenMap[string]{{"alice": "free"}},
			buckets:   frozenMap[bucket.State]{{"alice": {Tokens: 3 * bucket.Scale, Carry: 7, Last: 4_000}}},
			dedup: []dedupEntry{
				{key: dedupKey{client: "alice", id: "r1"}, decision: Decision{Decision: bucket.Decision{Allowed: true}, Tier: "free", Stamp: 3_000}},
				{key: dedupKey{client: "alice", id: "r2"}, decision: Decision{Decision: bucket.Decision{Allowed: true}, Tier: "free", Stamp: 4_000}},
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
			s.dedup = append(s.dedup, dedupEntry{key: dedupKey{client: "alice", id: "r1"}, decision: Decision{Stamp: 4_500}})
		},
		"request ids out of order": func(s *snapshot) { s.dedup[0], s.dedup[1] = s.dedup[1], s.dedup[0] },
		"empty request id":         func(s *snapshot) { s.dedup[0].key.id = "" },
		"origin with sequence 0":   func(s *snapshot) { s.byOrigin[0].decision.Origin = MakeOrigin(7, 0) },
		"origin entry after group": func(s *snapshot) { s.byOrigin[0].decision.Stamp = 6_000 },
		"mark after the group":     func(s *snapshot) { s.marks[7] = originMark{seq: 3, at: 6_000} },
		"invalid default":          func(s *snapshot) { s.config.Default = bucket.Policy{Capacity: 0, Rate: 1} },
		"over-long tier name":      func(s *snapshot) { s.tiers[0]["alice"] = strings.Repeat("t", bucket.MaxTierNameLen+1) },
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
