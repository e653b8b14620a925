package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
)

// idMemory against a plain map and list, over random puts, lookups, expiry
// and early eviction: it remembers exactly the model's ids with their
// decisions, in order, through table growth and shrinking, records that
// span many chunks and chunks dropped whole; and again with the chunks'
// sequence numbers wrapping around (as they do after 16 GiB of records).
func TestIDMemoryAgreesWithAModel(t *testing.T) {
	for _, firstSeq := range []uint64{0, posChunkMask - 3} {
		t.Run(fmt.Sprintf("first chunk %d", firstSeq), func(t *testing.T) { idMemoryAgreesWithAModel(t, firstSeq) })
	}
}

func idMemoryAgreesWithAModel(t *testing.T, firstSeq uint64) {
	type entry struct {
		d   idDigest
		dec Decision
	}
	rng := rand.New(rand.NewPCG(7, 11))
	var forgotten []uint64
	m := newIDMemory(1_000, func(o uint64) { forgotten = append(forgotten, o) })
	m.headSeq = firstSeq
	var model []entry
	var wantForgotten []uint64
	now := int64(0)
	next := 0
	chunksSeen := uint64(0)
	for step := range 60_000 {
		switch op := rng.IntN(100); {
		case op < 60: // a new id, sometimes named, sometimes evicting
			id := fmt.Sprintf("id-%d", next)
			next++
			d := digestOf("client", id)
			dec := Decision{Decision: bucket.Decision{Allowed: rng.IntN(2) == 0, Remaining: rng.Int64N(1 << 40), Limit: 10, RetryAfter: rng.Int64N(1000), ResetAfter: -1},
				Tier: []string{"default", "pro", ""}[rng.IntN(3)], Stamp: now, Origin: rng.Uint64(), Rate: rng.Int64N(1 << 30), RateKnown: rng.IntN(2) == 0,
				Window: int64(rng.IntN(2)) * 7, Shadow: rng.IntN(2) == 0}
			if !dec.RateKnown {
				dec.Rate = 0 // a rate not known is not kept
			}
			evictAt := 0
			if rng.IntN(4) == 0 {
				evictAt = 1 + rng.IntN(400)
			}
			for evictAt > 0 && len(model) >= evictAt {
				wantForgotten = append(wantForgotten, model[0].dec.Origin)
				model = model[1:]
			}
			m.put(d, "client", id, rng.IntN(2) == 0, dec, evictAt)
			model = append(model, entry{d, dec})
		case op < 85: // a lookup of a remembered id, or of one never seen
			if len(model) > 0 && op < 80 {
				e := model[rng.IntN(len(model))]
				got, ok := m.get(e.d)
				require.True(t, ok, "step %d", step)
				require.Equal(t, e.dec, got, "step %d", step)
			} else {
				_, ok := m.get(digestOf("client", "never"))
				require.False(t, ok)
			}
		default: // time passes; the old ones expire
			now += rng.Int64N(60)
			n := 0
			for n < len(model) && model[n].dec.Stamp < now-1_000 {
				wantForgotten = append(wantForgotten, model[n].dec.Origin)
				n++
			}
			require.Equal(t, n, m.expire(now), "step %d", step)
			model = model[n:]
		}
		chunksSeen = max(chunksSeen, m.headSeq+uint64(len(m.chunks)))
		require.Equal(t, len(model), m.len(), "step %d", step)
		require.LessOrEqual(t, 2*m.used, len(m.slots), "the table stays at most half full")
	}
	assert.Equal(t, wantForgotten, forgotten, "forgotten oldest first, each told once")
	assert.Greater(t, chunksSeen-firstSeq, uint64(6), "the run went through several chunks")
	var order []idDigest
	eachInView(m.view(), func(r idRecord) { order = append(order, r.digest) })
	want := make([]idDigest, len(model))
	for i, e := range model {
		want[i] = e.d
	}
	assert.Equal(t, want, order, "records in log order")

	m.expire(now + 2_000)
	assert.Zero(t, m.len())
	assert.Zero(t, m.bytes(), "an empty memory holds no chunk and no table")
}

// What one remembered id costs: its record and its share of the table,
// within idRecordBytes (what StateBytes counts) with the default tier.
func TestIDRecordBytes(t *testing.T) {
	m := newIDMemory(int64(DefaultDedupWindow), nil)
	const n = 200_000
	for i := range n {
		id := fmt.Sprintf("%016x", i)
		dec := Decision{Decision: bucket.Decision{Allowed: true, Remaining: 9 * bucket.Scale, Limit: 10, ResetAfter: 1_000_000_000},
			Tier: bucket.DefaultTierName, Stamp: 1_800_000_000_000_000_000 + int64(i)*5_000, Origin: uint64(i) | 0xabcdef<<40, Rate: bucket.Scale, RateKnown: true}
		m.put(digestOf("client-0000000001", id), "", "", false, dec, 0)
	}
	per := float64(m.bytes()) / n
	t.Logf("%.1f bytes per request id", per)
	assert.LessOrEqual(t, per, float64(idRecordBytes))
}
