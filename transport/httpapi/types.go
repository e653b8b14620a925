package httpapi

import (
	"encoding/json"
	"strconv"

	"github.com/quorate/quorate/bucket"
)

// The JSON bodies of the v1 API. They are shared by the server, the typed
// Client, the CLI and load generators. Durations are milliseconds rounded
// up; -1 (bucket.Never) means "never under the current policy".

// AllowRequest is the body of POST /v1/allow and one element of a batch.
type AllowRequest struct {
	// Client is the client id: 1..fsm.MaxClientLen bytes of valid UTF-8
	// without control characters.
	Client string `json:"client"`
	// Cost is the number of tokens to take, 0..bucket.MaxCost, a whole
	// number. Nil (field absent or null) means 1; 0 is a peek that takes
	// nothing.
	Cost *int64 `json:"cost,omitempty"`
	// RequestID, if not empty, makes the request idempotent within the
	// cluster's dedup window: a retry with the same client and request id
	// gets the original decision back (Duplicate set) and takes nothing.
	// At most fsm.MaxRequestIDLen bytes, same character rules as Client.
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
	// Duplicate reports that this is the original decision for a request id
	// seen before; nothing was taken this time.
	Duplicate bool `json:"duplicate,omitempty"`
	// MaybeDuplicate reports a fresh decision for a request id the group
	// may have decided before and forgotten early (it was remembering the
	// most ids it may): if this call retries an earlier one, that one may
	// have been decided too.
	MaybeDuplicate bool `json:"maybe_duplicate,omitempty"`
}

// BatchRequest is the body of POST /v1/allow/batch.
type BatchRequest struct {
	Requests []AllowRequest `json:"requests"`
}

// BatchResponse answers a BatchRequest: one result per request, in order.
type BatchResponse struct {
	Results []AllowResponse `json:"results"`
}

// PolicyJSON is a policy on the wire. RefillPerSecond is an exact decimal
// number of tokens per second (at most 9 decimal places), written as a JSON
// number.
type PolicyJSON struct {
	Capacity        int64       `json:"capacity"`
	RefillPerSecond json.Number `json:"refill_per_second"`
}

// PolicyToJSON renders p for the wire.
func PolicyToJSON(p bucket.Policy) PolicyJSON {
	return PolicyJSON{Capacity: p.Capacity, RefillPerSecond: json.Number(bucket.FormatRate(p.Rate))}
}

// Policy converts p back to a bucket.Policy and validates it.
func (p PolicyJSON) Policy() (bucket.Policy, error) {
	return bucket.ParsePolicy(strconv.FormatInt(p.Capacity, 10), p.RefillPerSecond.String())
}

// TiersResponse answers GET /v1/tiers.
type TiersResponse struct {
	// Version is the configuration version in force.
	Version uint64                `json:"version"`
	Default PolicyJSON            `json:"default"`
	Tiers   map[string]PolicyJSON `json:"tiers"`
}

// ClientResponse answers GET /v1/clients/{client}: the client's state now,
// as a cost-1 request would see it, without consuming anything.
type ClientResponse struct {
	Client string `json:"client"`
	// Tier is the tier whose policy applies, or "default".
	Tier string `json:"tier"`
	// AssignedTier is the tier the client is assigned to, "" if none. It may
	// name a tier that does not exist, in which case Tier is "default".
	AssignedTier string     `json:"assigned_tier"`
	Policy       PolicyJSON `json:"policy"`
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

// StatusResponse answers GET /healthz and a successful GET /readyz.
type StatusResponse struct {
	Status string `json:"status"`
}

// ErrorBody is every error answer: {"error": {"code": ..., "message": ...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the content of an ErrorBody. Code is stable and meant for
// programs (see the Code constants); Message is for people and may change.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
