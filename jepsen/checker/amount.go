package checker

import (
	"math/big"
	"math/bits"

	"github.com/quorate/quorate/bucket"
)

// amount is an exact signed number of tokens in units of 1e-18 token (one
// nanotoken is bucket.Scale units), as a 128-bit two's complement integer.
// bucket.State's Tokens and Carry are exactly such a value (Tokens*Scale +
// Carry), and a refill of elapsed ns at rate nanotokens/s adds exactly
// elapsed*rate units, so every balance the server can hold is an amount and
// refill is plain addition. The range (±1.7e20 tokens) covers any sum of
// capacities, costs and refills the API allows.
type amount struct {
	hi int64
	lo uint64
}

// unitsPerToken is 1e18: nanotokens per token times units per nanotoken.
const unitsPerToken = uint64(bucket.Scale) * uint64(bucket.Scale)

var oneUnit = amount{lo: 1}

// tokens returns n whole tokens.
func tokens(n int64) amount {
	if n < 0 {
		return tokens(-n).neg()
	}
	return mul(uint64(n), unitsPerToken)
}

// refillOf returns the refill of elapsed ns at rate nanotokens per second
// (0 for elapsed or rate <= 0).
func refillOf(elapsed, rate int64) amount {
	if elapsed <= 0 || rate <= 0 {
		return amount{}
	}
	return mul(uint64(elapsed), uint64(rate))
}

// mul returns x*y; both are below 2^63, so the product fits in 127 bits.
func mul(x, y uint64) amount {
	hi, lo := bits.Mul64(x, y)
	return amount{hi: int64(hi), lo: lo}
}

func (a amount) add(b amount) amount {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	return amount{hi: a.hi + b.hi + int64(c), lo: lo}
}

func (a amount) sub(b amount) amount {
	lo, borrow := bits.Sub64(a.lo, b.lo, 0)
	return amount{hi: a.hi - b.hi - int64(borrow), lo: lo}
}

func (a amount) neg() amount { return amount{}.sub(a) }

func (a amount) cmp(b amount) int {
	switch {
	case a.hi < b.hi:
		return -1
	case a.hi > b.hi:
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

func minAmount(a, b amount) amount {
	if a.cmp(b) <= 0 {
		return a
	}
	return b
}

func maxAmount(a, b amount) amount {
	if a.cmp(b) >= 0 {
		return a
	}
	return b
}

// big returns a as a big.Int (for printing).
func (a amount) big() *big.Int {
	v := new(big.Int).SetInt64(a.hi)
	v.Lsh(v, 64)
	return v.Add(v, new(big.Int).SetUint64(a.lo))
}

// String renders a in tokens, exactly when short and to 9 decimals otherwise.
func (a amount) String() string {
	r := new(big.Rat).SetFrac(a.big(), new(big.Int).SetUint64(unitsPerToken))
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(9)
}
