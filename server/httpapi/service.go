package httpapi

import (
	"context"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
)

// Service is what the HTTP API needs from a node. *cluster.Node satisfies it.
//
// Every method blocks until the answer is committed and applied (or, for
// reads, confirmed current by the group's leader), or until ctx is done.
// Errors are cluster.ErrUnavailable, cluster.ErrShuttingDown,
// bucket.ErrInvalidPolicy, bucket.ErrInvalidTierName, fsm.ErrNoSuchTier
// (wrapped), or a context error.
type Service interface {
	// Allow decides reqs and returns one decision per request, in order.
	// Requests have already been validated.
	Allow(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error)
	// Client returns client's tier, policy and balance without consuming.
	Client(ctx context.Context, client string) (fsm.ClientView, error)
	// SetClientTier assigns client to tier; an empty tier removes the
	// assignment. actor is who asks, for the audit trail.
	SetClientTier(ctx context.Context, client, tier, actor string) error
	// ResetClient forgets client's bucket and reports whether there was
	// one. actor is who asks, for the audit trail.
	ResetClient(ctx context.Context, client, actor string) (bool, error)
	// ChangeConfig applies one configuration change and reports where it
	// was applied; op.Actor is who asks, for the audit trail.
	ChangeConfig(ctx context.Context, op fsm.ConfigOp) (api.ConfigChange, error)
	// Audit returns the configuration changes after version since, at
	// most limit of them (1..cluster.MaxAuditPage).
	Audit(ctx context.Context, since uint64, limit int) (fsm.AuditPage, error)
	// Config returns the configuration in force.
	Config(ctx context.Context) (bucket.Config, error)
	// Status returns the node's view of the cluster.
	Status(ctx context.Context) (api.ClusterStatus, error)
	// Ready returns nil when every group has a leader.
	Ready(ctx context.Context) error
	// Routes returns where each data group is decided, as this node sees it.
	Routes() cluster.Routes
	// RoutesVersion is Routes().Version without building the routes: every
	// decision answer carries it (api.HeaderRoutesVersion).
	RoutesVersion() uint64
	// PolicyOf returns the tier and policy client is decided by, as the
	// node knows them without asking anyone: for answering when the
	// client's group cannot decide (a tier's when_unavailable).
	PolicyOf(client string) (string, bucket.Policy)
}

// Leaver is implemented by services that can leave their cluster on
// request; POST /v1/leave exists only for them. Leave returns once the node
// has handed over its groups and stopped (or ctx ended).
type Leaver interface {
	Leave(ctx context.Context) error
}
