package cluster

// The configuration side of the service: changes committed in the meta
// group and waited for in every data group, and reads of what is in force.

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/fsm"
)

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
	if err := validateOp(op); err != nil {
		return api.ConfigChange{}, err
	}
	if err := opNeedsVersion(op, n.ClusterVersion()); err != nil {
		return api.ConfigChange{}, err
	}
	var cc api.ConfigChange
	err := n.atLeader(ctx, n.meta,
		func() (err error) { cc, err = n.changeConfigLocal(ctx, op); return err },
		func(addr string) error {
			w, err := peerrpc.Call[peerrpc.WireConfigChange](ctx, n.rpc, addr, "/internal/config-op", peerrpc.ToWireConfigOp(op))
			cc = api.ConfigChange(w)
			return err
		})
	return cc, err
}

// changeConfigLocal is ChangeConfig on the meta group's leader.
func (n *Node) changeConfigLocal(ctx context.Context, op fsm.ConfigOp) (api.ConfigChange, error) {
	if err := validateOp(op); err != nil { // a peer's op is checked like a caller's
		return api.ConfigChange{}, err
	}
	if err := opNeedsVersion(op, n.meta.FSM.ClusterVersion()); err != nil {
		return api.ConfigChange{}, err
	}
	if cfg := n.meta.FSM.Config(); op.Kind == fsm.OpSetTier && len(cfg.Tiers) >= bucket.MaxTiers {
		if _, exists := cfg.Tiers[op.Tier]; !exists {
			return api.ConfigChange{}, fmt.Errorf("%w: %d tiers defined, at most %d", bucket.ErrTooManyTiers, len(cfg.Tiers), bucket.MaxTiers)
		}
	}
	op.Audited = n.audited(n.meta, op.Actor)
	if err := fsm.Validate(op); err != nil {
		return api.ConfigChange{}, err
	}
	res, err := n.meta.ApplyLocal(ctx, op)
	if err != nil {
		return api.ConfigChange{}, err
	}
	cr, ok := res.(*fsm.ConfigResult)
	if !ok {
		return api.ConfigChange{}, fmt.Errorf("meta group: unexpected apply result %T", res)
	}
	if cr.Err != nil {
		return api.ConfigChange{}, cr.Err
	}
	n.pushConfig()
	return n.waitApplied(ctx, cr.Version), nil
}

// pushConfig tells every node that a configuration is committed, so that
// group leaders install it without waiting for their next reconcile tick.
// The push carries nothing: each node fetches the configuration from the
// meta group (see configHint).
func (n *Node) pushConfig() {
	n.triggerReconcile() // this node leads the meta group: its replica is current
	for _, m := range n.trustedMembers() {
		if m.State != membership.Alive { // unproven members get no hints
			continue
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := peerrpc.Call[struct{}](ctx, n.rpc, m.Meta.RaftAddr, "/internal/install-config", struct{}{}); err != nil {
				n.logger.Debug("config push failed", "to", m.Meta.ID, "err", err)
			}
		}()
	}
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

// opNeedsVersion refuses op if it is of a type cluster version v may not
// commit.
func opNeedsVersion(op fsm.ConfigOp, v uint32) error {
	if op.NeedsPolicies() && v < fsm.ClusterVersionPolicies {
		return fmt.Errorf("%w: sliding windows, shadow mode, when_unavailable and on_raise need cluster version %d, the cluster is at %d",
			ErrClusterVersion, fsm.ClusterVersionPolicies, v)
	}
	return nil
}

func validateOp(op fsm.ConfigOp) error {
	switch op.Kind {
	case fsm.OpSetTier:
		if err := bucket.ValidateTierName(op.Tier); err != nil {
			return err
		}
		return op.Policy.Validate()
	case fsm.OpDeleteTier:
		return bucket.ValidateTierName(op.Tier)
	case fsm.OpSetDefault:
		if err := op.Policy.Validate(); err != nil {
			return fmt.Errorf("default policy: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unknown config operation %d", op.Kind)
}

// waitApplied waits until every data group's leader has applied version,
// or until 90% of ctx's remaining time is spent, and reports which did.
func (n *Node) waitApplied(ctx context.Context, version uint64) api.ConfigChange {
	wait := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d) * 9 / 10
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	done := map[string]bool{}
	for {
		remote := map[string]bool{} // leader addresses to ask
		for _, g := range n.groups {
			if done[g.ID] {
				continue
			}
			if self, addr := n.leaderOf(g); self {
				done[g.ID] = g.FSM.Config().Version >= version
			} else if addr != "" {
				remote[addr] = true
			}
		}
		for addr := range remote {
			sts, err := peerrpc.Call[[]peerrpc.WireGroupStatus](wctx, n.rpc, addr, "/internal/groups", struct{}{})
			if err != nil {
				continue
			}
			for _, st := range sts {
				if st.State == raft.Leader.String() && st.ConfigVersion >= version {
					done[st.ID] = true
				}
			}
		}
		cc := api.ConfigChange{Version: version}
		for _, g := range n.groups {
			if done[g.ID] {
				cc.Applied = append(cc.Applied, g.ID)
			} else {
				cc.Lagging = append(cc.Lagging, g.ID)
			}
		}
		if len(cc.Lagging) == 0 {
			return cc
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-wctx.Done():
			return cc
		}
	}
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
	err := n.atLeader(ctx, n.meta,
		func() (err error) { p, err = n.auditLocal(ctx, since, limit); return err },
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
const MaxAuditPage = 1000

// auditLocal is Audit on the meta group's leader.
func (n *Node) auditLocal(ctx context.Context, since uint64, limit int) (fsm.AuditPage, error) {
	if err := n.meta.VerifyRead(ctx); err != nil {
		return fsm.AuditPage{}, err
	}
	return n.meta.FSM.Audit(since, min(max(limit, 1), MaxAuditPage)), nil
}

// Config returns the configuration in force, read from the meta group's
// leader after it confirms its leadership.
func (n *Node) Config(ctx context.Context) (bucket.Config, error) {
	var c bucket.Config
	err := n.atLeader(ctx, n.meta,
		func() error {
			if err := n.meta.VerifyRead(ctx); err != nil {
				return err
			}
			c = n.meta.FSM.Config()
			return nil
		},
		func(addr string) (err error) {
			w, err := peerrpc.Call[peerrpc.WireConfig](ctx, n.rpc, addr, "/internal/config", struct{}{})
			c = w.Config()
			return readErr(err)
		})
	return c, err
}
