package bucket

import (
	"math"
	"math/bits"
)

// State is one client's bucket between decisions.
//
// The balance is Tokens nanotokens plus Carry/Scale of a nanotoken: refill
// products (nanoseconds × nanotokens per second) are exact in units of
// 1e-18 token, and the part below one nanotoken is kept in Carry rather than
// rounded away, so a balance never drifts from the exact real-number value.
//
// The zero State is not a full bucket: a client that has no state yet is
// represented by "no State" (see New), which starts full.
type State struct {
	// Tokens is the balance in nanotokens, 0..Capacity*Scale.
	Tokens int64
	// Carry is the balance below one nanotoken, in 1/Scale nanotokens, 0..Scale-1.
	Carry int64
	// Last is the time of the last decision, in nanoseconds since the Unix epoch.
	Last int64
}

// New returns the state of a bucket that has never been used: full, as of now.
func New(p Policy, now int64) State {
	return State{Tokens: p.Capacity * Scale, Last: now}
}

// Decision is the outcome of one request against a bucket.
type Decision struct {
	// Allowed reports whether cost tokens were taken.
	Allowed bool
	// Remaining is the balance after the decision, in nanotokens (rounded down).
	Remaining int64
	// Limit is the capacity of the policy in force, in tokens.
	Limit int64
	// RetryAfter is how long until a request of the same cost would be
	// allowed, in nanoseconds: 0 if it would be allowed now, Never if it
	// never will be (cost above capacity, or a bucket that does not refill).
	RetryAfter int64
	// ResetAfter is how long until the bucket is full again, in nanoseconds:
	// 0 if it is full, Never if it never refills.
	ResetAfter int64
}

// Never is the RetryAfter or ResetAfter of an event that will not happen
// while the policy stays as it is.
const Never int64 = -1

// RemainingTokens is Remaining in whole tokens, rounded down.
func (d Decision) RemainingTokens() int64 { return d.Remaining / Scale }

// Refill returns s brought forward to now under p: the balance is
// min(capacity, balance + elapsed × rate), clamped to p's capacity at once if
// the capacity was lowered. Time that goes backwards counts as no time and
// leaves Last where it was.
func Refill(p Policy, s State, now int64) State {
	capTokens := p.Capacity * Scale
	if now > s.Last {
		elapsed := uint64(now - s.Last)
		s.Last = now
		if s.Tokens < capTokens && p.Rate > 0 {
			// total = elapsed*rate + carry, in 1e-18 token; at most
			// 2^63 * 1e18 + 1e9 < 2^124, so 128 bits hold it.
			hi, lo := bits.Mul64(elapsed, uint64(p.Rate))
			var c uint64
			lo, c = bits.Add64(lo, uint64(s.Carry), 0)
			hi += c
			need := uint64(capTokens - s.Tokens)
			if hi >= Scale {
				// The quotient does not even fit in 64 bits: far past full.
				s.Tokens, s.Carry = capTokens, 0
			} else {
				add, rem := bits.Div64(hi, lo, Scale)
				if add >= need {
					s.Tokens, s.Carry = capTokens, 0
				} else {
					s.Tokens += int64(add)
					s.Carry = int64(rem)
				}
			}
		}
	}
	if s.Tokens >= capTokens {
		s.Tokens, s.Carry = capTokens, 0
	}
	return s
}

// Decide takes cost tokens from s at time now under policy p if the balance
// allows it, and returns the new state and the decision. A cost of 0 is a
// peek: it never changes the balance beyond refilling it. cost must be in
// 0..MaxCost; p must be valid.
func Decide(p Policy, s State, now int64, cost int64) (State, Decision) {
	s = Refill(p, s, now)
	want := cost * Scale
	d := Decision{Limit: p.Capacity}
	if s.Tokens >= want {
		s.Tokens -= want
		d.Allowed = true
	}
	d.Remaining = s.Tokens
	if d.Allowed {
		d.RetryAfter = 0
	} else {
		d.RetryAfter = timeToReach(p, s, want)
	}
	d.ResetAfter = timeToReach(p, s, p.Capacity*Scale)
	return s, d
}

// Peek returns the decision a request of cost would get at now, without
// taking anything: the balance shown is what Decide would see before taking.
func Peek(p Policy, s State, now int64, cost int64) Decision {
	s = Refill(p, s, now)
	d := Decision{Limit: p.Capacity, Remaining: s.Tokens}
	want := cost * Scale
	d.Allowed = s.Tokens >= want
	if !d.Allowed {
		d.RetryAfter = timeToReach(p, s, want)
	}
	d.ResetAfter = timeToReach(p, s, p.Capacity*Scale)
	return d
}

// IsFull reports whether s, brought forward to now, holds p's full capacity.
// A full bucket behaves exactly like a bucket that does not exist (New), so
// it may be forgotten.
func IsFull(p Policy, s State, now int64) bool {
	return Refill(p, s, now).Tokens == p.Capacity*Scale
}

// timeToReach returns the nanoseconds until s holds at least target
// nanotokens under p, rounded up; 0 if it already does and Never if it never
// will (target above capacity or no refill).
func timeToReach(p Policy, s State, target int64) int64 {
	if s.Tokens >= target {
		return 0
	}
	if target > p.Capacity*Scale || p.Rate == 0 {
		return Never
	}
	// Need (target-Tokens)*Scale - Carry in 1e-18 token; divide by rate, round up.
	hi, lo := bits.Mul64(uint64(target-s.Tokens), Scale)
	var b uint64
	lo, b = bits.Sub64(lo, uint64(s.Carry), 0)
	hi -= b
	rate := uint64(p.Rate)
	if hi >= rate {
		return math.MaxInt64 // longer than int64 nanoseconds; unreachable with the limits above
	}
	q, r := bits.Div64(hi, lo, rate)
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}
