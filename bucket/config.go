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
// tiers and a version that grows by one with every change.
//
// A Config is a value: methods that change it return a new Config and never
// modify the receiver's map, so a Config can be shared between goroutines
// once built.
type Config struct {
	Version uint64
	Default Policy
	Tiers   map[string]Policy
}

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

// WithTier returns c with tier name set to p and the version bumped.
func (c Config) WithTier(name string, p Policy) (Config, error) {
	if err := ValidateTierName(name); err != nil {
		return c, err
	}
	if err := p.Validate(); err != nil {
		return c, fmt.Errorf("tier %q: %w", name, err)
	}
	n := c.clone()
	n.Tiers[name] = p
	n.Version++
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
	n.Version++
	return n, true
}

// WithDefault returns c with a new default policy and the version bumped.
// An invalid default is refused.
func (c Config) WithDefault(p Policy) (Config, error) {
	if err := p.Validate(); err != nil {
		return c, fmt.Errorf("default policy: %w", err)
	}
	n := c.clone()
	n.Default = p
	n.Version++
	return n, nil
}

// Equal reports whether two configurations are identical, version included.
func (c Config) Equal(o Config) bool {
	return c.Version == o.Version && c.Default == o.Default && maps.Equal(c.Tiers, o.Tiers)
}

func (c Config) clone() Config {
	n := c
	n.Tiers = make(map[string]Policy, len(c.Tiers)+1)
	maps.Copy(n.Tiers, c.Tiers)
	return n
}
