package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/cluster/clientops"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/fanout"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/origin"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/status"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/version"
)

// Allow decides reqs, which must be valid (fsm.Validate; the server's
// decoders check them), and returns one decision per request, in order. Each
// request is decided by the leader of its client's group (this node, or
// another reached over the internal RPC); requests of one group ride in the
// same log entry. Every decision is committed and applied before it is
// returned.
//
// A node with more than Options.MaxPending decisions waiting refuses the
// call at once with ErrOverloaded, and so does a group whose queue is full.
func (n *Node) Allow(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if unsafeLocalDecisions {
		return n.allowUnsafe(reqs), nil
	}
	k := int64(len(reqs))
	if p := n.pending.Add(k); p > int64(n.opts.MaxPending) && p > k {
		n.pending.Add(-k)
		n.metrics.Refused(ErrOverloaded)
		return nil, fmt.Errorf("%w: %d decisions pending on this node", ErrOverloaded, p-k)
	}
	ds, err := n.allow(ctx, reqs)
	n.pending.Add(-k)
	if err != nil {
		n.metrics.Refused(err)
	}
	return ds, err
}

func (n *Node) allow(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
	// Checked here, on this node's replicas, so that a call is refused as
	// a whole; each group's leader checks again.
	if err := n.admission.Admit(nil, reqs); err != nil {
		return nil, err
	}
	return fanout.ByGroup(ctx, reqs, len(n.groups), n.startGroup, n.decideGroup)
}

// allowUnsafe decides on this node's replicas without raft: only in
// binaries built with the unsafe_decide tag (the fault suite's negative
// control).
func (n *Node) allowUnsafe(reqs []fsm.AllowRequest) []fsm.Decision {
	out := make([]fsm.Decision, len(reqs))
	for i, r := range reqs {
		g := n.groupFor(r.Client)
		res := g.FSM.ApplyCommand(fsm.Encode(fsm.Allow{Stamp: n.opts.Clock.Now().UnixNano(), Requests: []fsm.AllowRequest{r}}))
		out[i] = res.(*fsm.AllowResult).Decisions[0]
	}
	return out
}

// allowGroupAt is allowGroup of data group index group: the node's
// fanout.Decide (n.decideGroup, made once so a call allocates no closure).
func (n *Node) allowGroupAt(ctx context.Context, group int, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
	return n.allowGroup(ctx, n.groups[group], reqs)
}

// startGroupAt begins deciding part, all of data group index group, when
// this node serves the group: the node's fanout.Start. It returns nil
// where allowGroupAt must decide instead (another node leads, the lease
// lapsed, the batcher refused at once). Its Wait goes on as decide would
// if the entry's outcome calls for another attempt.
func (n *Node) startGroupAt(ctx context.Context, group int, part []fsm.AllowRequest) fanout.Wait {
	g := n.groups[group]
	if !n.router.Proposes(g) {
		return nil
	}
	r := origin.NewResolver(ctx, n.origins.With(part))
	p, err := g.Batch.Start(ctx, r.Requests())
	if err != nil {
		return nil // nothing was queued
	}
	return func() ([]fsm.Decision, error) {
		ds, err := p.Wait()
		if err = r.Check(err); errors.Is(err, errs.ErrNotLeader) {
			return n.decide(ctx, g, r)
		}
		return r.Finish(ds, err)
	}
}

// allowGroup decides reqs, all of group g, at g's leader. Each request gets
// an origin, so that when its outcome is lost in a failover the node learns
// it by retrying instead of answering "unknown" (see origin.Resolver).
func (n *Node) allowGroup(ctx context.Context, g *raftgroup.Group, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
	return n.decide(ctx, g, origin.NewResolver(ctx, n.origins.With(reqs)))
}

// decide proposes r's requests at g's leader until they are decided or r
// gives up.
func (n *Node) decide(ctx context.Context, g *raftgroup.Group, r *origin.Resolver) ([]fsm.Decision, error) {
	var ds []fsm.Decision
	err := n.router.AtLeader(ctx, g,
		func() (err error) { ds, err = g.Batch.Submit(ctx, r.Requests()); return r.Check(err) },
		func(addr string) (err error) {
			ds, err = n.fwd.Get(addr).Submit(ctx, peerrpc.AllowItem{Group: g.Index, Requests: r.Requests()})
			return r.Check(err)
		})
	return r.Finish(ds, err)
}

// Client returns client's state as of now, read from its group's leader
// after it confirms its leadership, without consuming anything.
func (n *Node) Client(ctx context.Context, client string) (fsm.ClientView, error) {
	g := n.groupFor(client)
	var v fsm.ClientView
	err := n.router.AtLeader(ctx, g,
		func() (err error) { v, err = clientops.View(ctx, g, n.opts.Clock, client); return err },
		func(addr string) (err error) {
			w, err := peerrpc.Call[peerrpc.WireClientView](ctx, n.rpc, addr, "/internal/client", peerrpc.ClientReq{Client: client})
			v = w.View()
			return readErr(err)
		})
	return v, err
}

// readErr lets atLeader retry a read whose answer was lost: a read changes
// nothing, so asking again is always safe.
func readErr(err error) error {
	if errors.Is(err, ErrOutcomeUnknown) {
		return fmt.Errorf("%w: %w", errs.ErrNotLeader, err)
	}
	return err
}

// SetClientTier assigns client to tier in the client's group; an empty tier
// removes the assignment. The tier need not exist: until it does, the client
// uses the default policy. actor is who asks, for the audit trail (see
// clientops.Audited).
func (n *Node) SetClientTier(ctx context.Context, client, tier, actor string) error {
	if err := clientops.CheckSetTier(client, tier, actor); err != nil {
		return err
	}
	g := n.groupFor(client)
	return n.router.AtLeader(ctx, g,
		func() error { return clientops.SetTier(ctx, g, n.opts.Clock, client, tier, actor) },
		func(addr string) error {
			_, err := peerrpc.Call[struct{}](ctx, n.rpc, addr, "/internal/set-tier", peerrpc.ClientReq{Client: client, Tier: tier, Actor: actor})
			return err
		})
}

// ResetClient forgets client's bucket in its group (fsm.ResetClient): its
// next decision finds it full. Its tier assignment stays. Refused with
// ErrClusterVersion below cluster version 2, where a replica of the
// release before could not apply the entry. It reports whether the group
// held a bucket for the client; actor is who asks, for the audit trail.
func (n *Node) ResetClient(ctx context.Context, client, actor string) (bool, error) {
	if err := clientops.CheckReset(client, actor); err != nil {
		return false, err
	}
	if n.ClusterVersion() < fsm.ClusterVersionPolicies {
		return false, fmt.Errorf("%w: reset needs cluster version %d, the cluster is at %d", ErrClusterVersion, fsm.ClusterVersionPolicies, n.ClusterVersion())
	}
	g := n.groupFor(client)
	var existed bool
	err := n.router.AtLeader(ctx, g,
		func() (err error) { existed, err = clientops.Reset(ctx, g, n.opts.Clock, client, actor); return err },
		func(addr string) (err error) {
			existed, err = peerrpc.Call[bool](ctx, n.rpc, addr, "/internal/reset-client", peerrpc.ClientReq{Client: client, Actor: actor})
			return err
		})
	return existed, err
}

// Ready returns nil when every group has a known leader and the node has
// disk to spare.
func (n *Node) Ready(ctx context.Context) error {
	if err := n.disk.Err(); err != nil {
		return err
	}
	if err := n.clockGuard.NotReady(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	for _, g := range n.allGroups() {
		self, addr := n.router.LeaderOf(g)
		if !self && addr == "" {
			return fmt.Errorf("%w: group %s has no leader", ErrUnavailable, g.ID)
		}
		if self && g.FSM.ConfigVersion() == 0 {
			return fmt.Errorf("%w: group %s has no configuration yet", ErrUnavailable, g.ID)
		}
	}
	return nil
}

// Status returns this node's view of the cluster, as GET /v1/cluster
// answers it: every known node, and every group as this node's replica
// sees it (status.Cluster).
func (n *Node) Status(ctx context.Context) (api.ClusterStatus, error) {
	self := api.NodeStatus{ID: n.opts.NodeID, RaftAddr: n.raftAddr, HTTPAddr: n.opts.HTTPAddr, State: string(membership.Alive),
		Version: version.Binary, MaxClusterVersion: n.maxClusterVersion()}
	// Unproven members show as such.
	return status.Cluster(self, n.ClusterVersion(), n.trustedMembers, n.allGroups(), n.router.LeaderOf), nil
}
