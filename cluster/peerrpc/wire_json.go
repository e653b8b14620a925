package peerrpc

import (
	"fmt"
	"maps"
	"time"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// The other internal calls are rare (operators' changes and reads) and
// carry JSON, but only of the explicit, tagged types below: never the fsm's
// or bucket's structs, so that renaming one of their fields cannot change
// the protocol between nodes.

// wirePolicy is a bucket.Policy. The members after the rate are those of
// cluster version 2, left out when zero, so that a policy v0.14.0 can say
// travels in the bytes v0.14.0 writes; a node sends the others only once
// the cluster version allows such policies, when no v0.14.0 node is left to
// drop them.
type wirePolicy struct {
	Capacity        int64 `json:"capacity"`
	Rate            int64 `json:"rate_nanotokens_per_second"`
	Algorithm       uint8 `json:"algorithm,omitempty"`
	Window          int64 `json:"window_ns,omitempty"`
	Mode            uint8 `json:"mode,omitempty"`
	WhenUnavailable uint8 `json:"when_unavailable,omitempty"`
}

func toWirePolicy(p bucket.Policy) wirePolicy {
	return wirePolicy{Capacity: p.Capacity, Rate: p.Rate, Algorithm: uint8(p.Algorithm), Window: p.Window, Mode: uint8(p.Mode), WhenUnavailable: uint8(p.WhenUnavailable)}
}

func (w wirePolicy) policy() bucket.Policy {
	return bucket.Policy{Capacity: w.Capacity, Rate: w.Rate, Algorithm: bucket.Algorithm(w.Algorithm), Window: w.Window,
		Mode: bucket.Mode(w.Mode), WhenUnavailable: bucket.Unavailable(w.WhenUnavailable)}
}

// WireConfigOp is an fsm.ConfigOp (POST /internal/config-op).
type WireConfigOp struct {
	Kind    string     `json:"kind"` // see opKinds
	Tier    string     `json:"tier,omitempty"`
	Policy  wirePolicy `json:"policy"`
	OnRaise uint8      `json:"on_raise,omitempty"` // cluster version 2
	// Actor is who asks for the change; the meta leader stamps it
	// (cluster version 2).
	Actor string `json:"actor,omitempty"`
}

var opKinds = map[fsm.ConfigOpKind]string{fsm.OpSetTier: "set_tier", fsm.OpDeleteTier: "delete_tier", fsm.OpSetDefault: "set_default"}

// ToWireConfigOp is op as it travels.
func ToWireConfigOp(op fsm.ConfigOp) WireConfigOp {
	return WireConfigOp{Kind: opKinds[op.Kind], Tier: op.Tier, Policy: toWirePolicy(op.Policy), OnRaise: uint8(op.OnRaise), Actor: op.Actor}
}

// Op is the operation w carries, refused if its kind is unknown.
func (w WireConfigOp) Op() (fsm.ConfigOp, error) {
	k, err := opKind(w.Kind)
	if err != nil {
		return fsm.ConfigOp{}, err
	}
	return fsm.ConfigOp{Kind: k, Tier: w.Tier, Policy: w.Policy.policy(), OnRaise: bucket.OnRaise(w.OnRaise), Audited: fsm.Audited{Actor: w.Actor}}, nil
}

// opKind is the kind opKinds names name, refused if it names none.
func opKind(name string) (fsm.ConfigOpKind, error) {
	for k, n := range opKinds {
		if n == name {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: config operation %q", fsm.ErrInvalidCommand, name)
}

// WireConfig is a bucket.Config (POST /internal/config).
type WireConfig struct {
	Version uint64                `json:"version"`
	Default wirePolicy            `json:"default"`
	Tiers   map[string]wirePolicy `json:"tiers"`
	Filled  map[string]uint64     `json:"filled,omitempty"` // cluster version 2
}

// ToWireConfig is c as it travels.
func ToWireConfig(c bucket.Config) WireConfig {
	w := WireConfig{Version: c.Version, Default: toWirePolicy(c.Default), Tiers: make(map[string]wirePolicy, len(c.Tiers))}
	for name, p := range c.Tiers {
		w.Tiers[name] = toWirePolicy(p)
	}
	if len(c.Filled) > 0 {
		w.Filled = maps.Clone(c.Filled)
	}
	return w
}

// Config is the configuration w carries.
func (w WireConfig) Config() bucket.Config {
	c := bucket.Config{Version: w.Version, Default: w.Default.policy(), Tiers: make(map[string]bucket.Policy, len(w.Tiers))}
	for name, p := range w.Tiers {
		c.Tiers[name] = p.policy()
	}
	if len(w.Filled) > 0 {
		c.Filled = maps.Clone(w.Filled)
	}
	return c
}

// WireClientView is an fsm.ClientView (POST /internal/client).
type WireClientView struct {
	Client       string      `json:"client"`
	AssignedTier string      `json:"assigned_tier,omitempty"`
	Tier         string      `json:"tier"`
	Policy       wirePolicy  `json:"policy"`
	Known        bool        `json:"known"`
	Allowed      bool        `json:"allowed"`
	Remaining    int64       `json:"remaining_nanotokens"`
	Limit        int64       `json:"limit"`
	RetryAfter   int64       `json:"retry_after_ns"`
	ResetAfter   int64       `json:"reset_after_ns"`
	At           int64       `json:"at_unix_nano"`
	Record       *wireRecord `json:"record,omitempty"` // cluster version 2
}

// ToWireClientView is v as it travels.
func ToWireClientView(v fsm.ClientView) WireClientView {
	return WireClientView{Client: v.Client, AssignedTier: v.AssignedTier, Tier: v.Tier, Policy: toWirePolicy(v.Policy), Known: v.Known,
		Allowed: v.Decision.Allowed, Remaining: v.Decision.Remaining, Limit: v.Decision.Limit,
		RetryAfter: v.Decision.RetryAfter, ResetAfter: v.Decision.ResetAfter, At: v.At, Record: toWireRecord(v.Record)}
}

// View is the client view w carries.
func (w WireClientView) View() fsm.ClientView {
	return fsm.ClientView{Client: w.Client, AssignedTier: w.AssignedTier, Tier: w.Tier, Policy: w.Policy.policy(), Known: w.Known,
		Decision: bucket.Decision{Allowed: w.Allowed, Remaining: w.Remaining, Limit: w.Limit, RetryAfter: w.RetryAfter, ResetAfter: w.ResetAfter},
		At:       w.At, Record: w.Record.record()}
}

// WireConfigChange answers POST /internal/config-op: where the change was
// applied (the fields of the released cluster.ConfigChange, whose JSON it
// keeps).
type WireConfigChange struct {
	Version uint64   `json:"version"`
	Applied []string `json:"applied"`
	Lagging []string `json:"lagging,omitempty"`
}

// WireGroupStatus is one raft group as a node's replica sees it (POST
// /internal/groups; the fields of the released cluster.GroupStatus, whose
// JSON it keeps).
type WireGroupStatus struct {
	ID            string    `json:"id"`
	State         string    `json:"state"`
	Leader        string    `json:"leader"`
	Term          uint64    `json:"term"`
	AppliedIndex  uint64    `json:"applied_index"`
	CommitIndex   uint64    `json:"commit_index"`
	LastContact   time.Time `json:"last_contact,omitzero"`
	Voters        []string  `json:"voters"`
	ConfigVersion uint64    `json:"config_version"`
}
