package fsm

import (
	"fmt"

	"github.com/quorate/quorate/bucket"
)

// Validate checks c against the rules of the envelope version this node
// writes: identifier lengths, costs, batch sizes, operation kinds, and that
// an installed configuration is valid. Rules are tied to the version: a rule
// tightened later must come with a new envelope version, so that entries
// committed under the old rules still apply the same way everywhere.
func Validate(c Command) error {
	var err error
	switch c := c.(type) {
	case Allow:
		err = validateAllow(c)
	case ConfigOp:
		switch {
		case len(c.Tier) > bucket.MaxTierNameLen:
			err = fmt.Errorf("tier name of %d bytes, at most %d", len(c.Tier), bucket.MaxTierNameLen)
		case c.Kind != OpSetTier && c.Kind != OpDeleteTier && c.Kind != OpSetDefault:
			err = fmt.Errorf("config op kind %d", c.Kind)
		default:
			err = c.Audited.validate()
		}
	case InstallConfig:
		for name := range c.Config.Tiers {
			if len(name) > bucket.MaxTierNameLen {
				err = fmt.Errorf("tier name of %d bytes, at most %d", len(name), bucket.MaxTierNameLen)
			}
		}
		if err == nil {
			err = c.Config.Validate()
		}
	case SetTier:
		switch {
		case c.Client == "" || len(c.Client) > MaxClientLen:
			err = fmt.Errorf("client id of %d bytes, must be 1..%d", len(c.Client), MaxClientLen)
		case len(c.Tier) > bucket.MaxTierNameLen:
			err = fmt.Errorf("tier name of %d bytes, at most %d", len(c.Tier), bucket.MaxTierNameLen)
		default:
			err = c.Audited.validate()
		}
	case ResetClient:
		if c.Client == "" || len(c.Client) > MaxClientLen {
			err = fmt.Errorf("client id of %d bytes, must be 1..%d", len(c.Client), MaxClientLen)
		} else {
			err = c.Audited.validate()
		}
	case Reclaim, SetClusterVersion, AllocateEpoch:
	default:
		err = fmt.Errorf("command %T", c)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidCommand, c.Type(), err)
	}
	return nil
}

func validateAllow(a Allow) error {
	if len(a.Requests) > MaxBatch {
		return fmt.Errorf("batch of %d requests, at most %d", len(a.Requests), MaxBatch)
	}
	for i, r := range a.Requests {
		switch {
		case r.Client == "" || len(r.Client) > MaxClientLen:
			return fmt.Errorf("request %d: client id of %d bytes, must be 1..%d", i, len(r.Client), MaxClientLen)
		case r.Cost < 0 || r.Cost > bucket.MaxCost:
			return fmt.Errorf("request %d: cost %d, must be 0..%d", i, r.Cost, bucket.MaxCost)
		case len(r.RequestID) > MaxRequestIDLen:
			return fmt.Errorf("request %d: request id of %d bytes, at most %d", i, len(r.RequestID), MaxRequestIDLen)
		case r.Retry && r.Origin == 0:
			return fmt.Errorf("request %d: a retry without an origin", i)
		case r.Origin != 0 && originSeq(r.Origin) == 0:
			return fmt.Errorf("request %d: origin %#x has sequence number 0", i, r.Origin)
		}
	}
	return nil
}
