// Package history is the record of one fault-suite run: every operation the
// workload invoked with its outcome and the server's answer, every fault the
// nemesis injected, every policy change and tier assignment, and the clock
// offsets in force.
//
// Times are nanoseconds since the Unix epoch. Invoke and Complete (and every
// Event and Policy time) come from the harness's own clock; Stamp is the
// server's group time. A History is written to a directory as JSON lines
// (ops.jsonl, events.jsonl, policies.jsonl, assignments.jsonl) plus
// meta.json, and the same
// History always produces the same bytes.
//
// The package only records; jepsen/checker judges.
package history

// Outcomes of an Op. An Op is one attempt (one HTTP request), and its
// outcome is what that attempt's answer says about that attempt alone.
const (
	// OutcomeOK: the server answered with a decision (200). With Duplicate
	// set it is the remembered decision of an earlier attempt with the same
	// key and request id, and this attempt took nothing.
	OutcomeOK = "ok"
	// OutcomeFail: the server said this attempt decided nothing: a 4xx, or
	// a 503 whose code promises it (unavailable, shutting_down, timeout,
	// overloaded, too_many_clients), or the request never left the harness
	// (no connection could be made). Nothing else is recorded as fail: a
	// checker that finds a fail attempt applied has found a server that
	// broke its word.
	OutcomeFail = "fail"
	// OutcomeInfo: unknown, this attempt may or may not have been applied
	// (503 outcome_unknown or an unrecognised 503 code, a 500, a connection
	// error after the request was sent, a client-side timeout).
	OutcomeInfo = "info"
)

// Kinds of an Op.
const (
	// KindAllow is POST /v1/allow: a decision that takes Cost tokens if the
	// balance covers it (Cost 0 is a peek).
	KindAllow = "allow"
	// KindRead is GET /v1/clients/{key}: the balance as a cost-1 request
	// would see it, without taking anything. Remaining and Limit are
	// recorded; Allowed and Cost are ignored.
	KindRead = "read"
)

// Event kinds and phases.
const (
	KindNemesis = "nemesis"
	PhaseStart  = "start"
	PhaseStop   = "stop"
)

// Op is one attempt of an operation of the workload: one request and its
// raw answer. The attempts of one logical operation share Process, Key,
// Cost and RequestID (a retry reuses the request id); the checkers settle
// what a request id's attempts decided together (at most one decision per
// key and request id). An operation without a request id has one attempt.
type Op struct {
	// Process is the logical client (worker) that issued the operation.
	Process int `json:"process"`
	// Key is the client id whose bucket the operation is about.
	Key string `json:"key"`
	// Node is the node the attempt was sent to.
	Node string `json:"node,omitempty"`
	// Kind is KindAllow or KindRead.
	Kind string `json:"kind"`
	// Cost is the tokens asked for.
	Cost int64 `json:"cost"`
	// RequestID is the idempotency key sent with every attempt.
	RequestID string `json:"request_id,omitempty"`
	// Invoke and Complete bound the attempt in harness time: it was sent at
	// Invoke, and its answer (or the give-up) came at Complete.
	Invoke   int64 `json:"invoke"`
	Complete int64 `json:"complete"`
	// Attempt numbers the attempts of one operation from 0 (resolve probes
	// after the run continue the count).
	Attempt int `json:"attempt,omitempty"`
	// Status is the HTTP status of the answer (0: none), and Error the
	// error code of a non-200 answer, or the transport error's class
	// ("dial", "send", "timeout", "read", "decode").
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// Outcome is OutcomeOK, OutcomeFail or OutcomeInfo.
	Outcome string `json:"outcome"`
	// The server's answer (Outcome ok only).
	Allowed bool `json:"allowed"`
	// Remaining is the balance after the decision in whole tokens, rounded
	// down, as the API returns it.
	Remaining int64 `json:"remaining"`
	// Limit is the capacity of the policy that decided (a sliding
	// window's limit).
	Limit int64  `json:"limit"`
	Tier  string `json:"tier,omitempty"`
	// WindowSeconds is the window of the sliding window that decided (0: a
	// token bucket decided, or a history written before it was recorded).
	WindowSeconds int64 `json:"window_seconds,omitempty"`
	// Stamp is the group time of the decision (server clock, unix ns).
	Stamp int64 `json:"stamp"`
	// Duplicate: the answer is an earlier decision for the same Key and
	// RequestID, returned again; nothing was taken by this call.
	Duplicate bool `json:"duplicate,omitempty"`
	// Probe says why the harness sent this attempt beyond the operation's
	// own retries (informational): "resolve" (after the run, to learn an
	// unknown outcome) or "repeat" (an ok request sent again on purpose to
	// check that it is answered as a duplicate).
	Probe string `json:"probe,omitempty"`
}

// Event is something the harness did to the cluster.
type Event struct {
	Time int64 `json:"time"`
	// Kind is KindNemesis.
	Kind string `json:"kind"`
	// Name identifies the fault, e.g. "kill n2", "partition halves",
	// "clock n1 +250ms". A stop pairs with the latest unpaired start of the
	// same Name.
	Name string `json:"name"`
	// Phase is PhaseStart or PhaseStop.
	Phase  string            `json:"phase"`
	Detail map[string]string `json:"detail,omitempty"`
}

// Policy is one policy change the harness made (PUT /v1/tiers/{tier}, or
// PUT /v1/default for Tier "default").
type Policy struct {
	// Time is when the change was acknowledged if Acked, otherwise when the
	// harness gave up on it.
	Time int64  `json:"time"`
	Tier string `json:"tier"`
	// Capacity in whole tokens and RatePerSec as an exact decimal (the
	// request's refill_per_second), for a token bucket.
	Capacity   int64  `json:"capacity"`
	RatePerSec string `json:"rate_per_sec"`
	// Algorithm is "sliding_window" for a sliding window ("" or
	// "token_bucket": a token bucket), with Limit and WindowSeconds.
	Algorithm     string `json:"algorithm,omitempty"`
	Limit         int64  `json:"limit,omitempty"`
	WindowSeconds int64  `json:"window_seconds,omitempty"`
	// OnRaise is the request's on_raise: "fill" (a change that raises the
	// tier's capacity refills every client of the tier once, at the
	// change), or "" / "keep" (balances carry over).
	OnRaise string `json:"on_raise,omitempty"`
	// Version is the configuration version the server answered (0 if none).
	Version uint64 `json:"version,omitempty"`
	// Acked: the server answered 200, so the change is applied in every
	// group. A change that is not acked may or may not be applied.
	Acked bool `json:"acked"`
	// Invoke is when the change was sent; 0 means unknown, in which case
	// checkers assume it may have taken effect at any time before Time.
	Invoke int64 `json:"invoke,omitempty"`
}

// Assignment is one tier assignment of a client the harness made (PUT
// /v1/clients/{key}/tier, or DELETE for Tier ""). It takes effect at the
// key's next decision after it is applied.
type Assignment struct {
	// Time is when the assignment was acknowledged if Acked, otherwise when
	// the harness gave up on it.
	Time int64 `json:"time"`
	// Invoke is when the assignment was sent.
	Invoke int64  `json:"invoke"`
	Key    string `json:"key"`
	// Tier is the tier assigned; "" means removed, i.e. the key uses the
	// default policy.
	Tier string `json:"tier"`
	// Acked: the server answered 200, so the assignment is applied. One
	// that is not acked may take effect at any time after Invoke, or never.
	Acked bool `json:"acked"`
}

// History is everything recorded in one run.
type History struct {
	Ops         []Op
	Events      []Event
	Policies    []Policy
	Assignments []Assignment
	// ClockOffsets maps each node to the largest |offset| (ns) ever injected
	// into its clock during the run.
	ClockOffsets map[string]int64
	// Meta is free-form: seed, versions, parameters.
	Meta map[string]string
}
