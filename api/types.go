// Package api is quorate's public wire format: every request and answer
// body of the HTTP API, the error codes with the kind of each (what a
// caller may do after it), the header names and the routes document. The
// server, the client, the CLI, the scripts and the fault suite all speak
// it; it imports nothing of quorate but bucket, so a program that only asks
// "allow?" links no raft, storage or gossip code.
package api

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/quorate/quorate/bucket"
)

// Limits on identifiers, enforced by the server with precise errors.
const (
	MaxClientLen    = 256
	MaxRequestIDLen = 128
)

// The JSON bodies of the v1 API. Durations are milliseconds rounded up; -1
// (bucket.Never) means "never under the current policy".

// AllowRequest is the body of POST /v1/allow and one element of a batch.
type AllowRequest struct {
	// Client is the client id: 1..MaxClientLen bytes of valid UTF-8
	// without control characters.
	Client string `json:"client"`
	// Cost is the number of tokens to take, 0..bucket.MaxCost, a whole
	// number. Nil (field absent or null) means 1; 0 is a peek that takes
	// nothing.
	Cost *int64 `json:"cost,omitempty"`
	// RequestID, if not empty, makes the request idempotent within the
	// cluster's dedup window: a retry with the same client and request id
	// gets the original decision back (Duplicate set) and takes nothing.
	// At most MaxRequestIDLen bytes, same character rules as Client.
	RequestID string `json:"request_id,omitempty"`
}

// AllowResponse is the answer to one AllowRequest.
type AllowResponse struct {
	Allowed bool `json:"allowed"`
	// Remaining is the balance after the decision, in whole tokens (rounded down).
	Remaining int64 `json:"remaining"`
	// Limit is the capacity of the policy that decided.
	Limit int64 `json:"limit"`
	// RetryAfterMs is how long until the same request would be allowed: 0
	// when allowed, -1 when it never will be under the current policy
	// (cost above capacity, or a bucket that does not refill).
	RetryAfterMs int64 `json:"retry_after_ms"`
	// ResetAfterMs is how long until the bucket is full again: 0 when full,
	// -1 when it never refills.
	ResetAfterMs int64 `json:"reset_after_ms"`
	// Tier is the tier whose policy decided, or "default".
	Tier string `json:"tier"`
	// StampUnixNano is the group time the decision was made at.
	StampUnixNano int64 `json:"stamp_unix_nano"`
	// RefillPerSecond is the refill rate of the policy that decided, an
	// exact decimal number of tokens per second as bucket.FormatRate writes
	// it ("0" for a bucket that never refills). It is empty, and absent
	// from the JSON, when the answer does not know it: a decision forwarded
	// between nodes, or a duplicate remembered, while the cluster runs at
	// the version of v0.14.0.
	RefillPerSecond json.Number `json:"refill_per_second,omitempty"`
	// WindowSeconds is the window of the sliding window that decided
	// (absent when a token bucket decided): Limit is then the most cost
	// admitted in any WindowSeconds, and Remaining what is left of it now.
	WindowSeconds int64 `json:"window_seconds,omitempty"`
	// Duplicate reports that this is the original decision for a request id
	// seen before; nothing was taken this time.
	Duplicate bool `json:"duplicate,omitempty"`
	// MaybeDuplicate reports a fresh decision for a request id the group
	// may have decided before and forgotten early (it was remembering the
	// most ids it may): if this call retries an earlier one, that one may
	// have been decided too.
	MaybeDuplicate bool `json:"maybe_duplicate,omitempty"`
	// Degraded reports an answer the cluster did not decide: the server
	// sets it when the client's group could not decide in time and its
	// tier says "when_unavailable": "allow", and the Go client when it
	// answers by itself because no node could decide. Allowed is then true
	// and Remaining 0: nothing about the bucket is known.
	Degraded bool `json:"degraded,omitempty"`
	// Shadow reports a decision of a tier in shadow mode: it was made and
	// recorded exactly as if enforced, Allowed is true whatever it was, and
	// WouldAllow says what enforcing would have answered (the other fields
	// are those of that decision).
	Shadow     bool  `json:"shadow,omitempty"`
	WouldAllow *bool `json:"would_allow,omitempty"`
}

// Shared values of AllowResponse.WouldAllow, so that setting it allocates
// nothing.
var (
	wouldAllowTrue  = true
	wouldAllowFalse = false
)

// SetShadow marks r as a shadow decision whose enforced answer was
// wouldAllow, and answers it allowed.
func (r *AllowResponse) SetShadow(wouldAllow bool) {
	r.Shadow, r.Allowed = true, true
	r.WouldAllow = &wouldAllowFalse
	if wouldAllow {
		r.WouldAllow = &wouldAllowTrue
	}
}

// BatchRequest is the body of POST /v1/allow/batch.
type BatchRequest struct {
	Requests []AllowRequest `json:"requests"`
}

// BatchResponse answers a BatchRequest: one result per request, in order.
type BatchResponse struct {
	Results []AllowResponse `json:"results"`
}

// Policy is a policy on the wire: a token bucket {"algorithm":
// "token_bucket", "capacity": C, "refill_per_second": R} (the algorithm
// may be left out) or a sliding window {"algorithm": "sliding_window",
// "limit": N, "window_seconds": W}, either with "mode" ("enforce", the
// default, or "shadow") and "when_unavailable" ("deny", the default, or
// "allow"). RefillPerSecond is an exact decimal number of tokens per second
// (at most 9 decimal places), written as a JSON number. The server writes
// every member that applies.
type Policy struct {
	Algorithm       string      `json:"algorithm,omitempty"`
	Capacity        int64       `json:"capacity,omitempty"`
	RefillPerSecond json.Number `json:"refill_per_second,omitempty"`
	Limit           int64       `json:"limit,omitempty"`
	WindowSeconds   int64       `json:"window_seconds,omitempty"`
	Mode            string      `json:"mode,omitempty"`
	WhenUnavailable string      `json:"when_unavailable,omitempty"`
}

// PolicyToJSON renders p for the wire.
func PolicyToJSON(p bucket.Policy) Policy {
	s := bucket.SpecOf(p)
	out := Policy{Algorithm: s.Algorithm, Mode: s.Mode, WhenUnavailable: s.WhenUnavailable}
	if p.Algorithm == bucket.SlidingWindow {
		out.Limit, out.WindowSeconds = p.Capacity, p.Window/bucket.Second
	} else {
		out.Capacity, out.RefillPerSecond = p.Capacity, json.Number(s.RefillPerSecond)
	}
	return out
}

// Bucket converts p back to a bucket.Policy and validates it.
func (p Policy) Bucket() (bucket.Policy, error) {
	return p.spec().Parse()
}

func (p Policy) spec() bucket.Spec {
	whole := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	return bucket.Spec{Algorithm: p.Algorithm, Capacity: whole(p.Capacity), RefillPerSecond: p.RefillPerSecond.String(),
		Limit: whole(p.Limit), WindowSeconds: whole(p.WindowSeconds), Mode: p.Mode, WhenUnavailable: p.WhenUnavailable}
}

// PolicyChange is the body of PUT /v1/tiers/{tier} and PUT /v1/default: a
// Policy and, optionally, what a raise does to the clients already under
// it: "keep" (the default: balances stay, a raise gifts nothing) or "fill"
// (a change that raises the capacity or limit refills every client of the
// tier to it, once, at the change).
type PolicyChange struct {
	Policy
	OnRaise string `json:"on_raise,omitempty"`
}

// TiersResponse answers GET /v1/tiers.
type TiersResponse struct {
	// Version is the configuration version in force.
	Version uint64            `json:"version"`
	Default Policy            `json:"default"`
	Tiers   map[string]Policy `json:"tiers"`
}

// ClientResponse answers GET /v1/clients/{client}: the client's state now,
// as a cost-1 request would see it, without consuming anything.
type ClientResponse struct {
	Client string `json:"client"`
	// Tier is the tier whose policy applies, or "default".
	Tier string `json:"tier"`
	// AssignedTier is the tier the client is assigned to, "" if none. It may
	// name a tier that does not exist, in which case Tier is "default".
	AssignedTier string `json:"assigned_tier"`
	Policy       Policy `json:"policy"`
	// Remaining is the balance in whole tokens, rounded down.
	Remaining int64 `json:"remaining"`
	// RemainingExact is the balance as an exact decimal number of tokens,
	// to the nanotoken (e.g. "4.5").
	RemainingExact string `json:"remaining_exact"`
	// RetryAfterMs is how long until a cost-1 request would be allowed (0:
	// now, -1: never under the current policy).
	RetryAfterMs int64 `json:"retry_after_ms"`
	// ResetAfterMs is how long until the bucket is full (0: full, -1: never).
	ResetAfterMs int64 `json:"reset_after_ms"`
	// Known reports whether the cluster holds a bucket for the client; an
	// unknown client has a full bucket.
	Known bool `json:"known"`
	// StampUnixNano is the group time the view was computed at.
	StampUnixNano int64 `json:"stamp_unix_nano"`
	// LastAssigned and LastReset are the client's last tier assignment and
	// last reset, absent if the cluster remembers none. They outlive the
	// bucket: a client's record is kept while it has a tier assignment,
	// and for 30 days after its last act once it has none.
	LastAssigned *Assignment `json:"last_assigned,omitempty"`
	LastReset    *Act        `json:"last_reset,omitempty"`
}

// SetTierRequest is the body of PUT /v1/clients/{client}/tier.
type SetTierRequest struct {
	Tier string `json:"tier"`
}

// ClientTierResponse answers PUT and DELETE /v1/clients/{client}/tier. Tier
// is "" after a DELETE.
type ClientTierResponse struct {
	Client string `json:"client"`
	Tier   string `json:"tier"`
}

// ResetResponse answers POST /v1/clients/{client}/reset: the client's
// bucket is forgotten, so its next decision finds it full; HadBucket says
// whether the cluster held one (false: it was full already).
type ResetResponse struct {
	Client    string `json:"client"`
	HadBucket bool   `json:"had_bucket"`
}

// StatusResponse answers GET /healthz and a successful GET /readyz.
type StatusResponse struct {
	Status string `json:"status"`
}

// ErrorBody is every error answer: {"error": {"code": ..., "message": ...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the content of an ErrorBody. Code is stable and meant for
// programs (see the Code constants and KindOf); Message is for people and
// may change.
type ErrorDetail struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// RoutesResponse is the body of GET /v1/routes.
type RoutesResponse struct {
	// Groups is the number of data groups.
	Groups int `json:"groups"`
	// Hash names how a client id maps to its group (RoutesHash).
	Hash string `json:"hash"`
	// Version rises whenever a group's leadership changes.
	Version uint64 `json:"version"`
	// Leaders maps a group ("0", "1", ...) to its leader's base URL; a
	// group without a known leader is absent.
	Leaders map[string]string `json:"leaders"`
}

// RoutesHash is RoutesResponse.Hash: the 64-bit FNV-1a hash of the client
// id's bytes, modulo the number of groups.
const RoutesHash = "fnv1a64-mod"

// ConfigChange answers PUT and DELETE /v1/tiers/{tier} and PUT /v1/default:
// where the change was applied. The answer is 200 when every group applied
// it, 202 when some had not by the deadline (they will, when they can).
type ConfigChange struct {
	// Version is the configuration version the change produced.
	Version uint64 `json:"version"`
	// Applied lists the groups that applied Version before the answer.
	Applied []string `json:"applied"`
	// Lagging lists the groups that had not applied Version by the deadline.
	Lagging []string `json:"lagging,omitempty"`
}

// ClusterStatus answers GET /v1/cluster: the answering node's view of the
// cluster.
type ClusterStatus struct {
	NodeID string `json:"node_id"`
	// ClusterVersion is the cluster version the node's replicas applied
	// (see the README's "Upgrading").
	ClusterVersion uint32        `json:"cluster_version"`
	Nodes          []NodeStatus  `json:"nodes"`
	Groups         []GroupStatus `json:"groups"`
}

// NodeStatus is one member as the answering node sees it.
type NodeStatus struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	// State is "alive", "leaving", "dead", "left" or "unproven" (a member
	// that has not proved its node id with a cluster certificate).
	State string `json:"state"`
	// Version is the node's binary version and MaxClusterVersion the
	// highest cluster version it runs (empty and 1 for a node of the
	// release before cluster versions).
	Version           string `json:"version"`
	MaxClusterVersion uint32 `json:"max_cluster_version"`
}

// GroupStatus is one raft group as the answering node's replica sees it.
type GroupStatus struct {
	// ID is "meta" for the meta group, "0".."G-1" for data groups.
	ID           string    `json:"id"`
	State        string    `json:"state"` // Leader, Follower, Candidate or Shutdown
	Leader       string    `json:"leader"`
	Term         uint64    `json:"term"`
	AppliedIndex uint64    `json:"applied_index"`
	CommitIndex  uint64    `json:"commit_index"`
	LastContact  time.Time `json:"last_contact,omitzero"`
	Voters       []string  `json:"voters"`
	// ConfigVersion is the configuration version applied in this group.
	ConfigVersion uint64 `json:"config_version"`
}
