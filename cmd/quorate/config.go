package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/quorate/quorate/bucket"
)

// fileConfig is the --config file: the default policy and tiers a new
// cluster starts with. After the first start the API is the source of truth.
//
//	{"default": {"capacity": 10, "refill_per_second": 1},
//	 "tiers": {"free": {"capacity": 5, "refill_per_second": 1},
//	           "hourly": {"algorithm": "sliding_window", "limit": 1000, "window_seconds": 3600,
//	                      "mode": "shadow", "when_unavailable": "allow"}}}
//
// The members are those of the API's policies (api.Policy).
type fileConfig struct {
	Default *filePolicy           `json:"default"`
	Tiers   map[string]filePolicy `json:"tiers"`
}

type filePolicy struct {
	Algorithm       string      `json:"algorithm"`
	Capacity        json.Number `json:"capacity"`
	RefillPerSecond json.Number `json:"refill_per_second"`
	Limit           json.Number `json:"limit"`
	WindowSeconds   json.Number `json:"window_seconds"`
	Mode            string      `json:"mode"`
	WhenUnavailable string      `json:"when_unavailable"`
}

func (p filePolicy) policy() (bucket.Policy, error) {
	return bucket.Spec{Algorithm: p.Algorithm, Capacity: p.Capacity.String(), RefillPerSecond: p.RefillPerSecond.String(),
		Limit: p.Limit.String(), WindowSeconds: p.WindowSeconds.String(), Mode: p.Mode, WhenUnavailable: p.WhenUnavailable}.Parse()
}

// loadConfig reads a --config file; an empty path gives the built-in
// default and no tiers. Any invalid policy, the default's included, is an
// error: a node refuses to start with it.
func loadConfig(path string) (bucket.Config, error) {
	cfg := bucket.Config{Default: bucket.BuiltinDefault, Tiers: map[string]bucket.Policy{}}
	if path == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	var fc fileConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return cfg, fmt.Errorf("config %s: trailing data after the object", path)
	}
	if fc.Default != nil {
		if cfg.Default, err = fc.Default.policy(); err != nil {
			return cfg, fmt.Errorf("config %s: default: %w", path, err)
		}
	}
	for name, fp := range fc.Tiers {
		if err := bucket.ValidateTierName(name); err != nil {
			return cfg, fmt.Errorf("config %s: %w", path, err)
		}
		p, err := fp.policy()
		if err != nil {
			return cfg, fmt.Errorf("config %s: tier %q: %w", path, name, err)
		}
		cfg.Tiers[name] = p
	}
	return cfg, nil
}
