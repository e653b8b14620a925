package checker

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
)

// maxPendingSum bounds the pending tokens whose subset sums are tracked
// exactly; beyond it a decision only bounds the balance by [0, capacity].
const maxPendingSum = 1 << 14

// settlement is what may be settled at a decision at t: the pending ops
// that may be applied by then (earliest <= t), grouped by cost, and those
// that may not yet.
type settlement struct {
	costs  []int64 // distinct costs of the eligible ops, ascending
	counts []int   // how many eligible ops of each cost
	later  []pending
	from   int64 // the earliest time any eligible op may have been applied
	total  int64 // sum of the eligible costs
}

func (s bstate) settlement(t int64) settlement {
	st := settlement{from: t}
	if s.pend == "" {
		return st
	}
	counts := map[int64]int{}
	for _, p := range decodePending(s.pend) {
		if p.earliest > t {
			st.later = append(st.later, p)
			continue
		}
		counts[p.cost] += p.n
		st.total += int64(p.n) * p.cost
		st.from = min(st.from, p.earliest)
	}
	for c := range counts {
		st.costs = append(st.costs, c)
	}
	slices.Sort(st.costs)
	for _, c := range st.costs {
		st.counts = append(st.counts, counts[c])
	}
	return st
}

// sums returns which totals 0..st.total some sub-multiset of the eligible
// ops (leaving out cost group skip, if >= 0) adds up to, as a bitset.
func (st settlement) sums(skip int) bitset {
	ok := newBitset(st.total + 1)
	ok.set(0)
	for g, c := range st.costs {
		if g == skip {
			continue
		}
		// n copies of c, as copies of c, 2c, 4c, ... (binary splitting).
		n := st.counts[g]
		for k := 1; n > 0; k *= 2 {
			m := min(k, n)
			ok.orShifted(int64(m) * c)
			n -= m
		}
	}
	return ok
}

// bitset is a fixed-size set of small non-negative integers.
type bitset []uint64

func newBitset(n int64) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int64)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int64) bool { return i >= 0 && i/64 < int64(len(b)) && b[i/64]&(1<<(i%64)) != 0 }

// orShifted adds i+d for every i in b (dropping what falls off the end).
func (b bitset) orShifted(d int64) {
	words, bitsOff := int(d/64), uint(d%64)
	for i := len(b) - 1; i >= words; i-- {
		v := b[i-words] << bitsOff
		if bitsOff > 0 && i-words-1 >= 0 {
			v |= b[i-words-1] >> (64 - bitsOff)
		}
		b[i] |= v
	}
}

// rest returns the pending ops left after a decision at which the totals
// in feasible may have been settled: for each cost, the most that some
// feasible choice leaves (so every choice's leftovers are included).
// Eligible ops get earliest -∞: they stay eligible from then on, and are
// interchangeable but for their cost.
func (st settlement) rest(feasible []int64) string {
	left := slices.Clone(st.later)
	zero := slices.Contains(feasible, 0)
	for g, c := range st.costs {
		keep := st.counts[g]
		if !zero {
			others := st.sums(g)
			keep = 0
			for _, p := range feasible {
				for j := 0; j <= st.counts[g] && int64(j)*c <= p; j++ {
					if others.has(p - int64(j)*c) {
						keep = max(keep, st.counts[g]-j)
						break
					}
				}
			}
		}
		left = append(left, pending{earliest: math.MinInt64, cost: c, n: keep})
	}
	return encodePending(left)
}

// pending is n info ops that may still be applied: cost tokens each, at a
// group time no earlier than earliest.
type pending struct {
	earliest, cost int64
	n              int
}

// encodePending renders a multiset of pending ops canonically (runs of
// equal ops, sorted), so that states compare with ==.
func encodePending(ps []pending) string {
	slices.SortFunc(ps, func(a, b pending) int {
		return cmp.Or(cmp.Compare(a.earliest, b.earliest), cmp.Compare(a.cost, b.cost))
	})
	b := make([]byte, 0, 24*len(ps))
	for i := 0; i < len(ps); {
		run := ps[i]
		for i++; i < len(ps) && ps[i].earliest == run.earliest && ps[i].cost == run.cost; i++ {
			run.n += ps[i].n
		}
		if run.n == 0 {
			continue
		}
		b = binary.BigEndian.AppendUint64(b, uint64(run.earliest))
		b = binary.BigEndian.AppendUint64(b, uint64(run.cost))
		b = binary.BigEndian.AppendUint64(b, uint64(run.n))
	}
	return string(b)
}

func decodePending(s string) []pending {
	ps := make([]pending, len(s)/24)
	for i := range ps {
		r := []byte(s[24*i : 24*i+24])
		ps[i] = pending{earliest: int64(binary.BigEndian.Uint64(r)), cost: int64(binary.BigEndian.Uint64(r[8:])), n: int(binary.BigEndian.Uint64(r[16:]))}
	}
	return ps
}
