package cluster

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned by Node methods. The HTTP layer maps them to status codes.
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
)

// Status is a node's view of the cluster, for GET /v1/cluster.
type Status struct {
	NodeID string        `json:"node_id"`
	Nodes  []NodeStatus  `json:"nodes"`
	Groups []GroupStatus `json:"groups"`
}

// NodeStatus describes one member.
type NodeStatus struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	State    string `json:"state"` // "alive", "leaving", "dead", "left" or "unproven" (memberState)
}

// GroupStatus describes one raft group as this node sees it.
type GroupStatus struct {
	// ID is the group number; the meta group is "meta", data groups "0".."G-1".
	ID           string    `json:"id"`
	State        string    `json:"state"` // this node's raft state: Leader, Follower, Candidate, Shutdown
	Leader       string    `json:"leader"`
	Term         uint64    `json:"term"`
	AppliedIndex uint64    `json:"applied_index"`
	CommitIndex  uint64    `json:"commit_index"`
	LastContact  time.Time `json:"last_contact,omitzero"`
	Voters       []string  `json:"voters"`
	// ConfigVersion is the configuration version applied in this group.
	ConfigVersion uint64 `json:"config_version"`
}

// ConfigChange reports where a configuration change was applied.
type ConfigChange struct {
	// Version is the configuration version the change produced.
	Version uint64 `json:"version"`
	// Applied lists the groups that applied Version before the answer.
	Applied []string `json:"applied"`
	// Lagging lists the groups that had not applied Version by the deadline;
	// they will, when they can.
	Lagging []string `json:"lagging,omitempty"`
}
