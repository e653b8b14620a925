package answer_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/server/answer"
)

func TestCeilDiv(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tt := range []struct{ ns, unit, want int64 }{
		{0, ms, 0}, {1, ms, 1}, {ms, ms, 1}, {ms + 1, ms, 2}, {bucket.Never, ms, -1},
		{math.MaxInt64, ms, math.MaxInt64/ms + 1}, {1, int64(time.Second), 1},
	} {
		assert.Equal(t, tt.want, answer.CeilDiv(tt.ns, tt.unit), "CeilDiv(%d, %d)", tt.ns, tt.unit)
	}
}

// The table of rate strings answers every rate's FormatRate, whichever
// rates share a slot, and a rate it holds costs nothing.
func TestRateStrings(t *testing.T) {
	var c answer.Rates
	rates := []int64{0, 1, bucket.Scale, bucket.Scale / 4, 3 * bucket.Scale, bucket.MaxRate}
	for i := range 200 {
		rates = append(rates, int64(i)*bucket.Scale/7)
	}
	for range 2 {
		for _, r := range rates {
			assert.Equal(t, json.Number(bucket.FormatRate(r)), c.Get(r), "rate %d", r)
		}
	}
	c.Get(bucket.Scale)
	assert.Zero(t, testing.AllocsPerRun(10, func() { c.Get(bucket.Scale) }))
}
