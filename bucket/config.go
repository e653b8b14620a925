package bucket

import (
	"fmt"
	"maps"
	"slices"
)

// BuiltinDefault is the global default policy a new node starts with when no
// configuration says otherwise: 10 tokens, refilling at 1 token per second.
var BuiltinDefault = Policy{Capacity: 10, Rate: 1 * Scale}

// Config is the global limit configuration: the default policy, the named
// tiers and a version that grows by one with every change, and for each
// tier (or the default, as DefaultTierName) that was raised with Fill, the
// version of its last fill.
//
// A Config is a value: methods that change it return a new Config and never
// modify the receiver's map, so a Config can be shared between goroutines
// once built.
type Config struct {
	Version uint64
	Default Policy
	Tiers   map[string]Policy
	// Filled maps a tier, or DefaultTierName, to the version of the
	// change that last raised it with Fill. A group fills the tier's
	// clients when it installs a configuration whose Filled version for
	// the tier is above the version it had: once per raise, however the
	// configuration reaches it. Nil or empty when nothing was filled.
	Filled map[string]uint64
}

// OnRaise says what a change that raises a policy's capacity (or limit)
// does to the clients already under it.
type OnRaise uint8

const (
	// Keep leaves every balance as it is: raising a limit never gifts
	// tokens (the default).
	Keep OnRaise = 0
	// Fill refills every client of the policy to the new capacity (empties
	// its window), once, at the change.
	Fill OnRaise = 1
)

var onRaiseNames = []string{Keep: "keep", Fill: "fill"}

func (o OnRaise) String() string { return nameOf(onRaiseNames, uint8(o), "on_raise") }

// ParseOnRaise reads "keep" or "fill" ("" is keep).
func ParseOnRaise(s string) (OnRaise, error) {
	v, err := valueOf(onRaiseNames, s, "on_raise")
	return OnRaise(v), err
}

// Raises reports whether changing a policy from old to p raises its
// capacity (a token bucket's capacity or a window's limit).
func Raises(old, p Policy) bool { return p.Capacity > old.Capacity }

// NewConfig returns version 0 of a configuration with the given default and
// no tiers. It fails if the default is invalid.
func NewConfig(def Policy) (Config, error) {
	if err := def.Validate(); err != nil {
		return Config{}, fmt.Errorf("default policy: %w", err)
	}
	return Config{Default: def, Tiers: map[string]Policy{}}, nil
}

// Validate checks that the default is valid and that every tier has a valid
// name. Tier policies are not required to be valid: a tier with an invalid
// policy resolves to the default (see Resolve).
func (c Config) Validate() error {
	if err := c.Default.Validate(); err != nil {
		return fmt.Errorf("default policy: %w", err)
	}
	for name := range c.Tiers {
		if err := ValidateTierName(name); err != nil {
			return err
		}
	}
	for name, v := range c.Filled {
		if _, ok := c.Tiers[name]; !ok && name != DefaultTierName {
			return fmt.Errorf("%w: a fill of %q, which is not a tier", ErrInvalidPolicy, name)
		}
		if v == 0 || v > c.Version {
			return fmt.Errorf("%w: a fill of %q at version %d of a configuration at %d", ErrInvalidPolicy, name, v, c.Version)
		}
	}
	return nil
}

// Resolve returns the policy a client assigned to tier uses and the name to
// report for it. An empty tier, a tier that does not exist and a tier whose
// policy is invalid all resolve to the default policy, reported as
// DefaultTierName.
func (c Config) Resolve(tier string) (string, Policy) {
	if tier != "" {
		if p, ok := c.Tiers[tier]; ok && p.Validate() == nil {
			return tier, p
		}
	}
	return DefaultTierName, c.Default
}

// TierNames returns the tier names in sorted order.
func (c Config) TierNames() []string {
	return slices.Sorted(maps.Keys(c.Tiers))
}

// WithTier returns c with tier name set to p and the version bumped. With
// Fill, a change that raises an existing tier's capacity records the new
// version as the tier's fill (see Filled); one that does not raise it, a
// repeat of the same change among them, fills nothing.
func (c Config) WithTier(name string, p Policy, onRaise OnRaise) (Config, error) {
	if err := ValidateTierName(name); err != nil {
		return c, err
	}
	if err := p.Validate(); err != nil {
		return c, fmt.Errorf("tier %q: %w", name, err)
	}
	old, had := c.Tiers[name]
	n := c.clone()
	n.Tiers[name] = p
	n.Version++
	if onRaise == Fill && had && old.Validate() == nil && Raises(old, p) {
		n.Filled[name] = n.Version
	}
	return n, nil
}

// WithoutTier returns c without tier name and the version bumped. The second
// result is false, and c is returned unchanged, if the tier does not exist.
func (c Config) WithoutTier(name string) (Config, bool) {
	if _, ok := c.Tiers[name]; !ok {
		return c, false
	}
	n := c.clone()
	delete(n.Tiers, name)
	delete(n.Filled, name)
	n.Version++
	return n, true
}

// WithDefault returns c with a new default policy and the version bumped,
// recording a fill as WithTier does. An invalid default is refused.
func (c Config) WithDefault(p Policy, onRaise OnRaise) (Config, error) {
	if err := p.Validate(); err != nil {
		return c, fmt.Errorf("default policy: %w", err)
	}
	n := c.clone()
	n.Default = p
	n.Version++
	if onRaise == Fill && Raises(c.Default, p) {
		n.Filled[DefaultTierName] = n.Version
	}
	return n, nil
}

// Extended reports whether c holds anything a configuration of the
// release before cluster version 2 could not (an extended policy or a
// fill), which only a cluster at version 2 may be given.
func (c Config) Extended() bool {
	if c.Default.Extended() || len(c.Filled) > 0 {
		return true
	}
	for _, p := range c.Tiers {
		if p.Extended() {
			return true
		}
	}
	return false
}

// Equal reports whether two configurations are identical, version included.
func (c Config) Equal(o Config) bool {
	return c.Version == o.Version && c.Default == o.Default && maps.Equal(c.Tiers, o.Tiers) && maps.Equal(c.Filled, o.Filled)
}

func (c Config) clone() Config {
	n := c
	n.Tiers = make(map[string]Policy, len(c.Tiers)+1)
	maps.Copy(n.Tiers, c.Tiers)
	n.Filled = make(map[string]uint64, len(c.Filled)+1)
	maps.Copy(n.Filled, c.Filled)
	return n
}
