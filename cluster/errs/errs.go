// Package errs holds the errors a node answers with, at every layer: a
// raft group's proposals, the batcher, the internal RPC and the Node's
// public methods. Each is an *Error that carries the code it is answered
// with and so its kind (whether anything may have been appended), which is
// what a caller needs to know to retry safely. Package cluster re-exports
// the public ones (cluster.ErrOutcomeUnknown is ErrOutcomeUnknown); the HTTP
// layer answers an error with the code of the first *Error in its chain
// (Classify), the internal RPC sends that error's wire code.
package errs

import (
	"errors"

	"github.com/quorate/quorate/api"
)

// Error is one of the node's errors. Errors are compared by identity
// (errors.Is with the variables below); one error may be a case of a
// broader one (ErrOutcomeUnknown and ErrNotLeader are cases of
// ErrUnavailable), which errors.Is follows.
type Error struct {
	text string
	code api.Code // the code the HTTP API answers with
	wire string   // the code between nodes (cluster/peerrpc), part of their protocol
	of   *Error
}

func (e *Error) Error() string { return e.text }

// Code is the API code the error is answered with.
func (e *Error) Code() api.Code { return e.code }

// Kind is what a caller may do after the error (api.KindOf of its code).
func (e *Error) Kind() api.Kind { return api.KindOf(e.code) }

// Wire is the error's code on the internal RPC.
func (e *Error) Wire() string { return e.wire }

// Unwrap is the broader error e is a case of, if any.
func (e *Error) Unwrap() error {
	if e.of == nil {
		return nil
	}
	return e.of
}

// Classify returns the first *Error in err's chain: the classification
// the error was made with where it happened. Code that wraps one of these
// errors puts it first ("%w: ...: %w", classification, cause), so the
// answer never depends on the order of a table.
func Classify(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

var (
	// ErrUnavailable means the group could not decide before the deadline:
	// it has no leader, or no quorum. Nothing was decided, unless the error
	// is also ErrOutcomeUnknown.
	ErrUnavailable = &Error{text: "group unavailable", code: api.CodeUnavailable, wire: "unavailable"}
	// ErrOutcomeUnknown means the request may or may not have taken effect:
	// it was, or may have been, appended to a group's log, and its answer
	// was lost (leadership lost, the node shut down, the connection to the
	// leader broke, or the deadline passed while it was in flight). A retry
	// with the same request id returns the original decision if there was
	// one. It is a case of ErrUnavailable.
	ErrOutcomeUnknown = &Error{text: "group unavailable: outcome unknown", code: api.CodeOutcomeUnknown, wire: "outcome_unknown", of: ErrUnavailable}
	// ErrOverloaded means the node has more work queued than it may take:
	// it refused the request at once, and nothing was decided.
	ErrOverloaded = &Error{text: "node overloaded", code: api.CodeOverloaded, wire: "overloaded"}
	// ErrTooManyClients means deciding the request would create state for
	// a client the node does not know while it holds its budget of clients
	// (Options.MaxClients): nothing was decided; clients it knows are still
	// served.
	ErrTooManyClients = &Error{text: "too many clients", code: api.CodeTooManyClients, wire: "too_many_clients"}
	// ErrRequestIDsFull means the request carries a new request id and its
	// group remembers the most ids it may (fsm.Options.RequestIDMax, from
	// cluster version 3): it was not decided, nothing was taken, and the
	// same request may be sent again; ids are never forgotten early.
	ErrRequestIDsFull = &Error{text: "request id memory full", code: api.CodeRequestIDsFull, wire: "request_ids_full"}
	// ErrDiskFull means the node's data dir is nearly out of space (see
	// Options.MinFreeDisk): it took no new decision; nothing was appended.
	ErrDiskFull = &Error{text: "disk nearly full", code: api.CodeDiskFull, wire: "disk_full"}
	// ErrShuttingDown means the node is stopping and took no part of the
	// request: nothing was appended.
	ErrShuttingDown = &Error{text: "node shutting down", code: api.CodeShuttingDown, wire: "shutting_down"}
	// ErrNotLeader means the request reached a node that does not serve the
	// group: nothing was appended, so it is safe to retry at the leader.
	// Node.atLeader retries exactly on it; it never leaves the node (were
	// it to, it would be answered unavailable). It is a case of
	// ErrUnavailable.
	ErrNotLeader = &Error{text: "group unavailable: not the leader", code: api.CodeUnavailable, wire: "not_leader", of: ErrUnavailable}
	// ErrClusterVersion means the request needs a log entry or format the
	// cluster version in force does not allow yet (a node of an older
	// release may still hold a replica): nothing was appended, and the same
	// request is refused until the cluster version rises.
	ErrClusterVersion = &Error{text: "not allowed at this cluster version", code: api.CodeClusterVersion, wire: "cluster_version"}
)

// All lists every Error, for the tables that map wire codes back to them.
var All = []*Error{ErrUnavailable, ErrOutcomeUnknown, ErrOverloaded, ErrTooManyClients, ErrRequestIDsFull, ErrDiskFull, ErrShuttingDown, ErrNotLeader, ErrClusterVersion}
