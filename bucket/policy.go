// Package bucket is quorate's exact decision core: policies (token
// buckets and sliding windows), their validation, tier resolution and the
// decision functions.
//
// Everything here is pure: state and policy go in, state and a decision come
// out, and the time is an argument. No function reads a clock, a random
// source or does I/O, and no state is floating point, so every replica that
// applies the same inputs computes bit-identical results on any architecture.
//
// Token balances are fixed-point integers in nanotokens (Scale units per
// token) with an exact sub-nanotoken remainder, so refill is exact for any
// rate that is a multiple of 1e-9 tokens per second. A sliding window keeps
// a log of what it admitted (window.go), so its limit is exact too.
package bucket

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
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

// Algorithm is how a policy decides.
type Algorithm uint8

// Algorithms. Values are part of the log format: never renumber.
const (
	// TokenBucket is the default: a bucket of Capacity tokens refilling at
	// Rate.
	TokenBucket Algorithm = 0
	// SlidingWindow admits at most Capacity cost in any Window of time,
	// exactly, from a log of what it admitted (see DecideWindow).
	SlidingWindow Algorithm = 1
)

// The names the API and the CLI write for each algorithm, mode and
// when-unavailable choice, indexed by value; the first of each is the
// default.
var (
	algorithmNames   = []string{TokenBucket: "token_bucket", SlidingWindow: "sliding_window"}
	modeNames        = []string{Enforce: "enforce", Shadow: "shadow"}
	unavailableNames = []string{Deny: "deny", AllowDegraded: "allow"}
)

// nameOf is names[v], or what a value without a name is printed as.
func nameOf(names []string, v uint8, what string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", what, v)
}

// valueOf is the value named name in names ("" is the default, 0), or an
// error that names the member and the choices.
func valueOf(names []string, name, member string) (uint8, error) {
	if name == "" {
		return 0, nil
	}
	for i, n := range names {
		if n == name {
			return uint8(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %s must be \"%s\", got %q", ErrInvalidPolicy, member, strings.Join(names, `" or "`), name)
}

func (a Algorithm) String() string { return nameOf(algorithmNames, uint8(a), "algorithm") }

// Mode says whether a policy's denials are enforced.
type Mode uint8

// Modes. Values are part of the log format.
const (
	// Enforce answers every decision as it was made.
	Enforce Mode = 0
	// Shadow makes and records every decision exactly as Enforce would, but
	// answers it allowed (marked shadow, with what it would have been), so
	// a new limit can be watched before it is enforced.
	Shadow Mode = 1
)

func (m Mode) String() string { return nameOf(modeNames, uint8(m), "mode") }

// Unavailable says what a node answers for a policy's clients when their
// group cannot decide.
type Unavailable uint8

// When-unavailable choices. Values are part of the log format.
const (
	// Deny answers that nothing was decided (503): fail closed.
	Deny Unavailable = 0
	// AllowDegraded answers allowed, marked degraded, without a decision:
	// fail open, at the price stated in the README's bound.
	AllowDegraded Unavailable = 1
)

func (u Unavailable) String() string { return nameOf(unavailableNames, uint8(u), "when_unavailable") }

// Limits of sliding-window policies: a client's window log holds at most
// Limit entries, so Limit bounds its memory.
const (
	// MaxWindowLimit is the largest limit of a sliding window.
	MaxWindowLimit = 10_000
	// MaxWindowSeconds is the longest window, in seconds (one day).
	MaxWindowSeconds = 86_400
)

// Second is one second in nanoseconds, the unit of a window.
const Second int64 = 1_000_000_000

// Policy is the shape of one client's limit. The zero Policy is invalid
// (capacity 0); a Policy is comparable, and two are the same policy exactly
// when they are ==.
type Policy struct {
	// Algorithm is TokenBucket or SlidingWindow.
	Algorithm Algorithm
	// Capacity is the most cost admitted at once: for a token bucket the
	// tokens it holds when full (1..MaxCapacity), for a sliding window its
	// limit, the most cost admitted in any window (1..MaxWindowLimit).
	Capacity int64
	// Rate is a token bucket's refill rate in nanotokens per second,
	// 0..MaxRate (0: the bucket never refills); 0 for a sliding window.
	Rate int64
	// Window is a sliding window's length in nanoseconds, a whole number of
	// seconds in 1..MaxWindowSeconds; 0 for a token bucket.
	Window int64
	// Mode is Enforce or Shadow.
	Mode Mode
	// WhenUnavailable is Deny or AllowDegraded.
	WhenUnavailable Unavailable
}

// Extended reports whether p uses anything a policy of the release before
// cluster version 2 could not say (an algorithm, a mode or a
// when-unavailable other than the defaults), which only a cluster at
// version 2 may be given.
func (p Policy) Extended() bool {
	return p.Algorithm != TokenBucket || p.Mode != Enforce || p.WhenUnavailable != Deny || p.Window != 0
}

// Validate reports whether p is usable, with a message naming the field.
func (p Policy) Validate() error {
	switch p.Mode {
	case Enforce, Shadow:
	default:
		return fmt.Errorf("%w: mode %d", ErrInvalidPolicy, p.Mode)
	}
	switch p.WhenUnavailable {
	case Deny, AllowDegraded:
	default:
		return fmt.Errorf("%w: when_unavailable %d", ErrInvalidPolicy, p.WhenUnavailable)
	}
	switch p.Algorithm {
	case TokenBucket:
		return p.validateBucket()
	case SlidingWindow:
		return p.validateWindow()
	}
	return fmt.Errorf("%w: algorithm %d", ErrInvalidPolicy, p.Algorithm)
}

func (p Policy) validateBucket() error {
	switch {
	case p.Capacity < 1:
		return fmt.Errorf("%w: capacity must be at least 1, got %d", ErrInvalidPolicy, p.Capacity)
	case p.Capacity > MaxCapacity:
		return fmt.Errorf("%w: capacity must be at most %d, got %d", ErrInvalidPolicy, int64(MaxCapacity), p.Capacity)
	case p.Rate < 0:
		return fmt.Errorf("%w: refill_per_second must not be negative", ErrInvalidPolicy)
	case p.Rate > MaxRate:
		return fmt.Errorf("%w: refill_per_second must be at most %d", ErrInvalidPolicy, int64(MaxCapacity))
	case p.Window != 0:
		return fmt.Errorf("%w: a token bucket has no window_seconds", ErrInvalidPolicy)
	}
	return nil
}

func (p Policy) validateWindow() error {
	switch {
	case p.Capacity < 1 || p.Capacity > MaxWindowLimit:
		return fmt.Errorf("%w: limit must be 1..%d, got %d", ErrInvalidPolicy, MaxWindowLimit, p.Capacity)
	case p.Window < Second || p.Window > MaxWindowSeconds*Second || p.Window%Second != 0:
		return fmt.Errorf("%w: window_seconds must be a whole number of seconds in 1..%d", ErrInvalidPolicy, MaxWindowSeconds)
	case p.Rate != 0:
		return fmt.Errorf("%w: a sliding window has no refill_per_second", ErrInvalidPolicy)
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

// Spec is a policy as it is written by hand (the API's bodies, the
// --config file, the CLI's flags): each member the literal it was given in
// (JSON numbers as written, or flag values), "" for a member not given.
// Parse is the one parser of a policy.
type Spec struct {
	Algorithm       string // "token_bucket" (the default) or "sliding_window"
	Capacity        string // token bucket
	RefillPerSecond string // token bucket
	Limit           string // sliding window
	WindowSeconds   string // sliding window
	Mode            string // "enforce" (the default) or "shadow"
	WhenUnavailable string // "deny" (the default) or "allow"
}

// Parse validates s and returns its policy; numbers are parsed exactly.
// Errors wrap ErrInvalidPolicy and name the member.
func (s Spec) Parse() (Policy, error) {
	var p Policy
	mode, err := valueOf(modeNames, s.Mode, "mode")
	if err != nil {
		return Policy{}, err
	}
	when, err := valueOf(unavailableNames, s.WhenUnavailable, "when_unavailable")
	if err != nil {
		return Policy{}, err
	}
	alg, err := valueOf(algorithmNames, s.Algorithm, "algorithm")
	if err != nil {
		return Policy{}, err
	}
	p.Mode, p.WhenUnavailable = Mode(mode), Unavailable(when)
	switch Algorithm(alg) {
	case TokenBucket:
		switch {
		case s.Limit != "" || s.WindowSeconds != "":
			return Policy{}, fmt.Errorf("%w: limit and window_seconds belong to \"algorithm\": \"sliding_window\"", ErrInvalidPolicy)
		case s.Capacity == "":
			return Policy{}, fmt.Errorf("%w: capacity is required", ErrInvalidPolicy)
		case s.RefillPerSecond == "":
			return Policy{}, fmt.Errorf("%w: refill_per_second is required (0 for a bucket that never refills)", ErrInvalidPolicy)
		}
		if p.Capacity, err = ParseCapacity(s.Capacity); err != nil {
			return Policy{}, err
		}
		if p.Rate, err = ParseRate(s.RefillPerSecond); err != nil {
			return Policy{}, err
		}
	case SlidingWindow:
		p.Algorithm = SlidingWindow
		switch {
		case s.Capacity != "" || s.RefillPerSecond != "":
			return Policy{}, fmt.Errorf("%w: a sliding window takes limit and window_seconds, not capacity or refill_per_second", ErrInvalidPolicy)
		case s.Limit == "":
			return Policy{}, fmt.Errorf("%w: limit is required", ErrInvalidPolicy)
		case s.WindowSeconds == "":
			return Policy{}, fmt.Errorf("%w: window_seconds is required", ErrInvalidPolicy)
		}
		if p.Capacity, err = parseWhole("limit", s.Limit, 1, MaxWindowLimit); err != nil {
			return Policy{}, err
		}
		w, err := parseWhole("window_seconds", s.WindowSeconds, 1, MaxWindowSeconds)
		if err != nil {
			return Policy{}, err
		}
		p.Window = w * Second
	}
	return p, p.Validate()
}

// SpecOf writes p as a Spec, every member that applies filled in: what
// Parse reads back to p.
func SpecOf(p Policy) Spec {
	s := Spec{Algorithm: p.Algorithm.String(), Mode: p.Mode.String(), WhenUnavailable: p.WhenUnavailable.String()}
	if p.Algorithm == SlidingWindow {
		s.Limit = strconv.FormatInt(p.Capacity, 10)
		s.WindowSeconds = strconv.FormatInt(p.Window/Second, 10)
	} else {
		s.Capacity = strconv.FormatInt(p.Capacity, 10)
		s.RefillPerSecond = FormatRate(p.Rate)
	}
	return s
}

// ParsePolicy parses a token bucket from its capacity and refill rate
// literals: Spec{Capacity: capacity, RefillPerSecond: refillPerSecond}.Parse().
func ParsePolicy(capacity, refillPerSecond string) (Policy, error) {
	return Spec{Capacity: capacity, RefillPerSecond: refillPerSecond}.Parse()
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
	return parseWhole("capacity", s, 1, MaxCapacity)
}

// parseWhole converts a JSON number into a whole number in lo..hi; errors
// name the member.
func parseWhole(name, s string, lo, hi int64) (int64, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok || !validNumber.MatchString(s) {
		return 0, fmt.Errorf("%w: %s %q is not a number", ErrInvalidPolicy, name, s)
	}
	if !r.IsInt() {
		return 0, fmt.Errorf("%w: %s must be a whole number, got %s", ErrInvalidPolicy, name, s)
	}
	if r.Cmp(new(big.Rat).SetInt64(lo)) < 0 {
		return 0, fmt.Errorf("%w: %s must be at least %d, got %s", ErrInvalidPolicy, name, lo, s)
	}
	if r.Cmp(new(big.Rat).SetInt64(hi)) > 0 {
		return 0, fmt.Errorf("%w: %s must be at most %d, got %s", ErrInvalidPolicy, name, hi, s)
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
