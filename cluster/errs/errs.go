// Package errs holds the errors a node answers with, at every layer: a
// raft group's proposals, the batcher, the internal RPC and the Node's
// public methods. Each says whether anything may have been appended, which
// is what a caller needs to know to retry safely. Package cluster re-exports
// the public ones (cluster.ErrOutcomeUnknown is ErrOutcomeUnknown); the HTTP
// layer maps them to status codes, the internal RPC to codes on the wire.
package errs

import (
	"errors"
	"fmt"
)

var (
	// ErrUnavailable means the group could not decide before the deadline:
	// it has no leader, or no quorum. Nothing was decided, unless the error
	// is also ErrOutcomeUnknown.
	ErrUnavailable = errors.New("group unavailable")
	// ErrOutcomeUnknown means the request may or may not have taken effect:
	// it was, or may have been, appended to a group's log, and its answer
	// was lost (leadership lost, the node shut down, the connection to the
	// leader broke, or the deadline passed while it was in flight). A retry
	// with the same request id returns the original decision if there was
	// one. It wraps ErrUnavailable.
	ErrOutcomeUnknown = fmt.Errorf("%w: outcome unknown", ErrUnavailable)
	// ErrOverloaded means the node has more work queued than it may take:
	// it refused the request at once, and nothing was decided.
	ErrOverloaded = errors.New("node overloaded")
	// ErrTooManyClients means deciding the request would create state for
	// a client the node does not know while it holds its budget of clients
	// (Options.MaxClients): nothing was decided; clients it knows are still
	// served.
	ErrTooManyClients = errors.New("too many clients")
	// ErrDiskFull means the node's data dir is nearly out of space (see
	// Options.MinFreeDisk): it took no new decision; nothing was appended.
	ErrDiskFull = errors.New("disk nearly full")
	// ErrShuttingDown means the node is stopping and took no part of the
	// request: nothing was appended.
	ErrShuttingDown = errors.New("node shutting down")
	// ErrNotLeader means the request reached a node that does not serve the
	// group: nothing was appended, so it is safe to retry at the leader.
	// Node.atLeader retries exactly on it; it never leaves the node.
	ErrNotLeader = fmt.Errorf("%w: not the leader", ErrUnavailable)
)
