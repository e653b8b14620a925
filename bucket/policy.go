// Package bucket is quorate's exact token-bucket core: policies, their
// validation, tier resolution and the decision function.
//
// Everything here is pure: state and policy go in, state and a decision come
// out, and the time is an argument. No function reads a clock, a random
// source or does I/O, and no state is floating point, so every replica that
// applies the same inputs computes bit-identical results on any architecture.
//
// Token balances are fixed-point integers in nanotokens (Scale units per
// token) with an exact sub-nanotoken remainder, so refill is exact for any
// rate that is a multiple of 1e-9 tokens per second.
package bucket

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
)

// Scale is the number of fixed-point units (nanotokens) in one token, and the
// number of nanorate units in one token per second.
const Scale = 1_000_000_000

// Limits on policy numbers. They keep every intermediate value inside int64
// (balances) or 128 bits (refill products).
const (
	// MaxCapacity is the largest capacity a policy may have, in tokens.
	MaxCapacity = 1_000_000_000
	// MaxRate is the largest refill rate, in nanotokens per second
	// (one billion tokens per second).
	MaxRate = MaxCapacity * Scale
	// MaxCost is the largest cost of one decision, in tokens.
	MaxCost = MaxCapacity
)

// DefaultTierName is what a decision reports as its tier when the client was
// decided under the global default policy. It cannot be used as a tier name.
const DefaultTierName = "default"

// ErrInvalidPolicy is returned (wrapped) for a policy that breaks a rule.
var ErrInvalidPolicy = errors.New("invalid policy")

// ErrInvalidTierName is returned (wrapped) for an unusable tier name.
var ErrInvalidTierName = errors.New("invalid tier name")

// MaxTiers is the most tiers a configuration may define. Every group holds
// the whole configuration and every node keeps it in memory, so the number
// is bounded; the bound is enforced where tiers are created (the API, the
// initial configuration), never when a committed entry is applied.
const MaxTiers = 1000

// ErrTooManyTiers is returned (wrapped) when creating a tier would pass
// MaxTiers.
var ErrTooManyTiers = errors.New("too many tiers")

// Policy is the shape of one bucket: how many tokens it holds when full and
// how fast it refills. The zero Policy is invalid (capacity 0).
type Policy struct {
	// Capacity is the most tokens the bucket holds, in whole tokens, 1..MaxCapacity.
	Capacity int64
	// Rate is the refill rate in nanotokens per second, 0..MaxRate.
	// A rate of 0 means the bucket never refills.
	Rate int64
}

// Validate reports whether p is usable, with a message naming the field.
func (p Policy) Validate() error {
	if p.Capacity < 1 {
		return fmt.Errorf("%w: capacity must be at least 1, got %d", ErrInvalidPolicy, p.Capacity)
	}
	if p.Capacity > MaxCapacity {
		return fmt.Errorf("%w: capacity must be at most %d, got %d", ErrInvalidPolicy, int64(MaxCapacity), p.Capacity)
	}
	if p.Rate < 0 {
		return fmt.Errorf("%w: refill_per_second must not be negative", ErrInvalidPolicy)
	}
	if p.Rate > MaxRate {
		return fmt.Errorf("%w: refill_per_second must be at most %d", ErrInvalidPolicy, int64(MaxCapacity))
	}
	return nil
}

// RateString renders the refill rate in tokens per second as an exact
// decimal, e.g. "0.5" or "10".
func (p Policy) RateString() string {
	return FormatRate(p.Rate)
}

// FormatRate renders a nanorate as an exact decimal number of tokens per second.
func FormatRate(rate int64) string {
	whole, frac := rate/Scale, rate%Scale
	if frac == 0 {
		return fmt.Sprintf("%d", whole)
	}
	s := fmt.Sprintf("%d.%09d", whole, frac)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	return s
}

// ParsePolicy is the one parser of a policy, for every place one is written
// by hand (the API's bodies, the --config file, the CLI's flags): capacity
// and refill_per_second as the literals they were given in (JSON numbers,
// or flag values), parsed exactly and validated. An empty literal is a
// missing field. Errors wrap ErrInvalidPolicy and name the field.
func ParsePolicy(capacity, refillPerSecond string) (Policy, error) {
	if capacity == "" {
		return Policy{}, fmt.Errorf("%w: capacity is required", ErrInvalidPolicy)
	}
	if refillPerSecond == "" {
		return Policy{}, fmt.Errorf("%w: refill_per_second is required (0 for a bucket that never refills)", ErrInvalidPolicy)
	}
	c, err := ParseCapacity(capacity)
	if err != nil {
		return Policy{}, err
	}
	r, err := ParseRate(refillPerSecond)
	if err != nil {
		return Policy{}, err
	}
	p := Policy{Capacity: c, Rate: r}
	return p, p.Validate()
}

// ParseRate converts a decimal number of tokens per second (as JSON writes it:
// "2", "0.25", "1e3") into a nanorate. It rejects values that are negative,
// too large, not numbers, or finer than one nanotoken per second.
//
// What FormatRate writes is read without allocating (the HTTP answer's
// headers read the rate back from its decimal form); any other spelling
// is parsed as an exact rational, with the same result.
func ParseRate(s string) (int64, error) {
	if r, ok := parsePlainRate(s); ok {
		return r, nil
	}
	return parseRateExact(s)
}

// parsePlainRate reads the form FormatRate writes: digits without a
// leading zero, then optionally a point and one to nine digits, at most
// MaxRate. It reports false for anything else, valid or not.
func parsePlainRate(s string) (int64, bool) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || len(whole) > 10 || len(whole) > 1 && whole[0] == '0' || dot && (frac == "" || len(frac) > 9) {
		return 0, false
	}
	var w, f int64
	for i := 0; i < len(whole); i++ {
		c := whole[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		w = w*10 + int64(c-'0')
	}
	for i := 0; i < 9; i++ {
		f *= 10
		if i < len(frac) {
			c := frac[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			f += int64(c - '0')
		}
	}
	if w > MaxCapacity || w*Scale+f > MaxRate {
		return 0, false
	}
	return w*Scale + f, true
}

// parseRateExact is ParseRate for any JSON number.
func parseRateExact(s string) (int64, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok || !validNumber.MatchString(s) {
		return 0, fmt.Errorf("%w: refill_per_second %q is not a number", ErrInvalidPolicy, s)
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("%w: refill_per_second must not be negative, got %s", ErrInvalidPolicy, s)
	}
	if r.Cmp(new(big.Rat).SetInt64(MaxCapacity)) > 0 {
		return 0, fmt.Errorf("%w: refill_per_second must be at most %d, got %s", ErrInvalidPolicy, int64(MaxCapacity), s)
	}
	r.Mul(r, new(big.Rat).SetInt64(Scale))
	if !r.IsInt() {
		return 0, fmt.Errorf("%w: refill_per_second %s has more than 9 decimal places", ErrInvalidPolicy, s)
	}
	return r.Num().Int64(), nil
}

// ParseCapacity converts a JSON number into a capacity in whole tokens.
func ParseCapacity(s string) (int64, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok || !validNumber.MatchString(s) {
		return 0, fmt.Errorf("%w: capacity %q is not a number", ErrInvalidPolicy, s)
	}
	if !r.IsInt() {
		return 0, fmt.Errorf("%w: capacity must be a whole number of tokens, got %s", ErrInvalidPolicy, s)
	}
	if r.Cmp(new(big.Rat).SetInt64(1)) < 0 {
		return 0, fmt.Errorf("%w: capacity must be at least 1, got %s", ErrInvalidPolicy, s)
	}
	if r.Cmp(new(big.Rat).SetInt64(MaxCapacity)) > 0 {
		return 0, fmt.Errorf("%w: capacity must be at most %d, got %s", ErrInvalidPolicy, int64(MaxCapacity), s)
	}
	return r.Num().Int64(), nil
}

// validNumber is the JSON number grammar; big.Rat alone also accepts
// fractions like "1/3" and hex, which a policy must not.
var validNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// MaxTierNameLen is the longest tier name accepted.
const MaxTierNameLen = 64

var tierNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// ValidateTierName checks a tier name: 1..64 characters of lower-case
// letters, digits, '_', '.', '-', starting with a letter or digit, and not the
// reserved name "default".
func ValidateTierName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: tier name is empty", ErrInvalidTierName)
	case len(name) > MaxTierNameLen:
		return fmt.Errorf("%w: tier name is longer than %d bytes", ErrInvalidTierName, MaxTierNameLen)
	case name == DefaultTierName:
		return fmt.Errorf("%w: %q is reserved for the global default policy", ErrInvalidTierName, name)
	case !tierNameRE.MatchString(name):
		return fmt.Errorf("%w: %q must be lower-case letters, digits, '_', '.', '-', starting with a letter or digit", ErrInvalidTierName, name)
	}
	return nil
}
