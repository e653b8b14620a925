package cluster

import (
	"time"

	"github.com/quorate/quorate/cluster/errs"
)

// Errors returned by Node methods, defined in package errs (where each is
// documented) so that every layer below the Node answers with the same
// values. Each is an *Error carrying the API code (and so the kind) it is
// answered with: the HTTP layer answers an error with Classify's.
var (
	ErrUnavailable    = errs.ErrUnavailable    // no leader or no quorum by the deadline; nothing decided
	ErrOutcomeUnknown = errs.ErrOutcomeUnknown // may have been appended; retry with the same request id to learn
	ErrOverloaded     = errs.ErrOverloaded     // refused at once, nothing decided
	ErrTooManyClients = errs.ErrTooManyClients // a new client past Options.MaxClients, nothing decided
	ErrDiskFull       = errs.ErrDiskFull       // below Options.MinFreeDisk, nothing appended
	ErrShuttingDown   = errs.ErrShuttingDown   // the node is stopping, nothing appended
)

// Error is the type of the errors above.
type Error = errs.Error

// Classify returns the first *Error in err's chain: how the error was
// classified where it happened (see errs.Classify).
func Classify(err error) (*Error, bool) { return errs.Classify(err) }

// Status is a node's view of the cluster, for GET /v1/cluster.
type Status struct {
	NodeID string `json:"node_id"`
	// ClusterVersion is the cluster version this node's replicas have
	// applied (see Node.ClusterVersion).
	ClusterVersion uint32        `json:"cluster_version"`
	Nodes          []NodeStatus  `json:"nodes"`
	Groups         []GroupStatus `json:"groups"`
}

// NodeStatus describes one member.
type NodeStatus struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	State    string `json:"state"` // "alive", "leaving", "dead", "left" or "unproven": a membership.State
	// Version is the node's binary version and MaxClusterVersion the
	// highest cluster version it runs, as it gossips them (empty and 1 for
	// a node of the release before cluster versions).
	Version           string `json:"version"`
	MaxClusterVersion uint32 `json:"max_cluster_version"`
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
