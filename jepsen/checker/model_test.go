package checker

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
)

func TestAmountMatchesBigInt(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bigOf := func(x int64) *big.Int { return big.NewInt(x) }
	units := new(big.Int).SetUint64(unitsPerToken)
	for range 2000 {
		a, b := rng.Int64N(2*bucket.MaxCapacity)-bucket.MaxCapacity, rng.Int64N(2*bucket.MaxCapacity)-bucket.MaxCapacity
		el, rate := rng.Int64N(math.MaxInt64), rng.Int64N(bucket.MaxRate+1)
		got := tokens(a).add(refillOf(el, rate)).sub(tokens(b))
		want := new(big.Int).Mul(bigOf(a), units)
		want.Add(want, new(big.Int).Mul(bigOf(el), bigOf(rate)))
		want.Sub(want, new(big.Int).Mul(bigOf(b), units))
		require.Zero(t, got.big().Cmp(want), "%d + %d×%d - %d", a, el, rate, b)
		assert.Equal(t, want.Sign(), got.cmp(amount{}))
	}
	assert.Equal(t, "1.500000000", tokens(3).sub(refillOf(int64(1.5e9), bucket.Scale)).String())
	assert.Equal(t, "-2", tokens(-2).String())
	assert.Equal(t, amount{}, refillOf(-5, 10))
}

func TestSettlementSumsAndRest(t *testing.T) {
	s := bstate{pend: encodePending([]pending{
		{earliest: 10, cost: 1, n: 2},
		{earliest: 20, cost: 3, n: 1},
		{earliest: 90, cost: 1, n: 1}, // not yet eligible at 50
	})}
	st := s.settlement(50)
	assert.Equal(t, []int64{1, 3}, st.costs)
	assert.Equal(t, []int{2, 1}, st.counts)
	assert.Equal(t, int64(5), st.total)
	assert.Equal(t, int64(10), st.from)
	sums := st.sums(-1)
	var got []int64
	for v := range st.total + 1 {
		if sums.has(v) {
			got = append(got, v)
		}
	}
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 5}, got)
	assert.False(t, st.sums(0).has(1), "without the cost-1 ops only 0 and 3")
	assert.True(t, st.sums(0).has(3))

	// Settling exactly 3 can be the cost-3 op (both cost-1 ops left) or
	// not; settling 4 must take the cost-3 op and one cost-1 op.
	assert.ElementsMatch(t, []pending{{earliest: 90, cost: 1, n: 1}, {earliest: math.MinInt64, cost: 1, n: 2}},
		decodePending(st.rest([]int64{3})))
	assert.ElementsMatch(t, []pending{{earliest: 90, cost: 1, n: 1}, {earliest: math.MinInt64, cost: 1, n: 1}},
		decodePending(st.rest([]int64{4})))
	assert.Len(t, decodePending(st.rest([]int64{0, 4})), 3, "settling nothing leaves everything")

	b := newBitset(130)
	b.set(0)
	b.orShifted(64)
	b.orShifted(3)
	assert.True(t, b.has(67))
	assert.True(t, b.has(64))
	assert.True(t, b.has(3))
	assert.False(t, b.has(65))
	assert.False(t, b.has(-1))
	assert.False(t, b.has(1000))
}

func TestMergeKeepsTheMost(t *testing.T) {
	a := bstate{lo: tokens(1), hi: tokens(2), last: 5, pend: encodePending([]pending{{earliest: 1, cost: 1, n: 2}})}
	b := bstate{lo: tokens(0), hi: tokens(1), last: 5, pend: encodePending([]pending{{earliest: 1, cost: 1, n: 1}, {earliest: 2, cost: 2, n: 1}})}
	require.True(t, mergeable(a, b))
	m := merge(a, b)
	assert.Equal(t, tokens(0), m.lo)
	assert.Equal(t, tokens(2), m.hi)
	assert.ElementsMatch(t, []pending{{earliest: 1, cost: 1, n: 2}, {earliest: 2, cost: 2, n: 1}}, decodePending(m.pend))
	c := a
	c.last = 6
	assert.Len(t, newStateSet([]bstate{a, b, c}), 2)
}

// TestInfoOpSettledInALaterGap: an info op invoked before two decisions may
// have been applied between them.
func TestInfoOpSettledInALaterGap(t *testing.T) {
	three := withPolicy(bucket.Policy{Capacity: 3})
	lim := limit(3)
	runCases(t, Linearizable, []checkCase{
		{name: "applied after the second decision", p: three, valid: true, h: hist(
			unknown(0, msec),
			with(allowed(2*msec, 3*msec, 2*msec, 2), lim),
			with(allowed(50*msec, 51*msec, 50*msec, 0), lim),
		)},
		{name: "never applied", p: three, valid: true, h: hist(
			unknown(0, msec),
			with(allowed(2*msec, 3*msec, 2*msec, 2), lim),
			with(allowed(50*msec, 51*msec, 50*msec, 1), lim),
		)},
		{name: "applied once, not twice", p: three, h: hist(
			unknown(0, msec),
			with(allowed(2*msec, 3*msec, 2*msec, 1), lim),
			with(denied(50*msec, 51*msec, 50*msec, 0), lim),
		)},
		{name: "cannot be applied before it was sent", p: three, h: hist(
			with(allowed(0, msec, 0, 2), lim),
			with(allowed(2*msec, 3*msec, 2*msec, 0), lim),
			unknown(10*msec, 11*msec),
		)},
	})
}

func TestTighten(t *testing.T) {
	op := func(stamp, call, ret int64, read bool) porcupine.Operation {
		kind := stepAllow
		if read {
			kind = stepRead
		}
		return porcupine.Operation{Input: step{kind: kind, stamp: stamp}, Call: call, Return: ret}
	}
	ops := []porcupine.Operation{
		op(10, 0, 100, false), // must come before the stamp-20 decision: returns by 50
		op(20, 5, 50, false),  // must come after the stamp-15 read: calls no earlier than 30
		op(15, 30, 40, true),  // a read: comes before stamp 20 (returns by 50), may come after it
		op(25, 1, 200, false), // after the stamp-15 read: calls no earlier than 30
		{Input: step{kind: stepAllow, info: true}, Call: 3, Return: 3},
	}
	_, _, ok := tighten(ops)
	require.True(t, ok)
	assert.Equal(t, [2]int64{0, 50}, [2]int64{ops[0].Call, ops[0].Return})
	assert.Equal(t, [2]int64{30, 50}, [2]int64{ops[1].Call, ops[1].Return}, "after the stamp-15 read")
	assert.Equal(t, [2]int64{30, 40}, [2]int64{ops[2].Call, ops[2].Return})
	assert.Equal(t, [2]int64{30, 200}, [2]int64{ops[3].Call, ops[3].Return})
	assert.Equal(t, [2]int64{3, 3}, [2]int64{ops[4].Call, ops[4].Return}, "info ops are left alone")

	bad := []porcupine.Operation{op(10, 60, 70, false), op(20, 0, 50, false)}
	y, z, ok := tighten(bad)
	assert.False(t, ok)
	assert.Equal(t, 0, y, "the stamp-10 op, invoked at 60 ...")
	assert.Equal(t, 1, z, "... after the stamp-20 op completed at 50")

	// A read does not order the decisions after it.
	fine := []porcupine.Operation{op(30, 0, 10, true), op(20, 20, 30, false)}
	_, _, ok = tighten(fine)
	assert.True(t, ok)
}
