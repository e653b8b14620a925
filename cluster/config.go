package cluster

// The configuration side of the service: changes committed in the meta
// group and waited for in every data group (configsync), and reads of what
// is in force.

import (
	"context"
	"fmt"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clientops"
	"github.com/quorate/quorate/cluster/configsync"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
)

// newConfigSyncer is the node's configsync.Syncer; it needs the RPC
// client, so start builds it, before the RPC server answers hints.
func (n *Node) newConfigSyncer() *configsync.Syncer {
	return configsync.New(configsync.Config{
		Self: n.opts.NodeID, Initial: n.opts.Initial,
		Groups:   func() (*raftgroup.Group, []*raftgroup.Group) { return n.meta, n.groups },
		LeaderOf: n.router.LeaderOf,
		Members:  n.trustedMembers,
		RPC:      n.rpc,
		Versions: n.versions,
		Audited: func(g *raftgroup.Group, actor string) fsm.Audited {
			return clientops.Audited(g, n.opts.Clock, actor)
		},
		Trigger: n.triggerReconcile,
		Logger:  n.logger,
	})
}

// ChangeConfig commits op in the meta group and then waits, for most of what
// is left of ctx, until every data group has applied the new version. Groups
// that have not by then are reported as lagging; they apply it when they can.
//
// A policy of cluster version 2 or a fill (fsm.ConfigOp.NeedsPolicies) is
// refused with ErrClusterVersion until the cluster is there, here and on
// the meta leader against its own replica. op.Actor is who asks: the meta
// leader records it in the audit trail with its time, from cluster
// version 2 on.
func (n *Node) ChangeConfig(ctx context.Context, op fsm.ConfigOp) (api.ConfigChange, error) {
	if err := configsync.ValidateOp(op); err != nil {
		return api.ConfigChange{}, err
	}
	if err := configsync.OpNeedsVersion(op, n.ClusterVersion()); err != nil {
		return api.ConfigChange{}, err
	}
	var cc api.ConfigChange
	err := n.router.AtLeader(ctx, n.meta,
		func() (err error) { cc, err = n.configs.ChangeLocal(ctx, op); return err },
		func(addr string) error {
			w, err := peerrpc.Call[peerrpc.WireConfigChange](ctx, n.rpc, addr, "/internal/config-op", peerrpc.ToWireConfigOp(op))
			cc = api.ConfigChange(w)
			return err
		})
	return cc, err
}

// PolicyOf returns the tier and policy client is decided by, as this
// node's replicas know them without asking anyone: from its group's
// replica here (whose assignment and configuration may lag the leader's)
// if it has a configuration, else the default policy of the meta group's
// replica. The HTTP API uses it only to answer for a group that cannot
// decide (when_unavailable).
func (n *Node) PolicyOf(client string) (string, bucket.Policy) {
	if tier, p, v := n.groupFor(client).FSM.Resolve(client); v > 0 {
		return tier, p
	}
	return bucket.DefaultTierName, n.meta.FSM.Config().Default
}

// Audit returns the configuration changes after version since, at most
// limit of them (held to 1..MaxAuditPage), from the meta group's leader
// after it confirms its leadership. Refused with ErrClusterVersion below
// cluster version 2, before which nothing is recorded.
func (n *Node) Audit(ctx context.Context, since uint64, limit int) (fsm.AuditPage, error) {
	if v := n.ClusterVersion(); v < fsm.ClusterVersionAudit {
		return fsm.AuditPage{}, fmt.Errorf("%w: the audit trail starts at cluster version %d, the cluster is at %d", ErrClusterVersion, fsm.ClusterVersionAudit, v)
	}
	var p fsm.AuditPage
	err := n.router.AtLeader(ctx, n.meta,
		func() (err error) { p, err = n.configs.AuditLocal(ctx, since, limit); return err },
		func(addr string) error {
			w, err := peerrpc.Call[peerrpc.WireAuditPage](ctx, n.rpc, addr, "/internal/audit", peerrpc.WireAuditReq{Since: since, Limit: limit})
			if err == nil {
				p, err = w.Page()
			}
			return err
		})
	return p, err
}

// MaxAuditPage is the most changes one Audit call returns.
const MaxAuditPage = configsync.MaxAuditPage

// Config returns the configuration in force, read from the meta group's
// leader after it confirms its leadership.
func (n *Node) Config(ctx context.Context) (bucket.Config, error) {
	var c bucket.Config
	err := n.router.AtLeader(ctx, n.meta,
		func() (err error) { c, err = n.configs.ConfigLocal(ctx); return err },
		func(addr string) (err error) {
			w, err := peerrpc.Call[peerrpc.WireConfig](ctx, n.rpc, addr, "/internal/config", struct{}{})
			c = w.Config()
			return readErr(err)
		})
	return c, err
}
