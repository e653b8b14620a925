// Package clientops is what a group's leader does for one client: read its
// state (View), assign its tier (SetTier), forget its bucket (Reset), and
// say who made a change and when (Audited). The node runs them on the
// group's leader, itself or the one it reaches over the internal RPC.
package clientops

import (
	"cmp"
	"context"
	"fmt"
	"net/http"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
)

// View is the node's Client on g's leader: client's state as of now, once
// the leader confirmed its leadership.
func View(ctx context.Context, g *raftgroup.Group, clk clock.Clock, client string) (fsm.ClientView, error) {
	if err := g.VerifyRead(ctx); err != nil {
		return fsm.ClientView{}, err
	}
	return g.FSM.View(client, clk.Now().UnixNano()), nil
}

// CheckSetTier is the one check of a tier assignment, the caller's on the
// node it reaches and a peer's at the leader: client, tier (empty removes
// the assignment) and actor as any cluster version takes them, so that
// nothing a caller is refused can be assigned through the internal RPC.
func CheckSetTier(client, tier, actor string) error {
	if tier != "" {
		if err := bucket.ValidateTierName(tier); err != nil {
			return err
		}
	}
	return fsm.Validate(fsm.SetTier{Client: client, Tier: tier, Audited: fsm.Audited{Actor: actor}})
}

// CheckReset is the one check of a reset, the caller's and a peer's.
func CheckReset(client, actor string) error {
	return fsm.Validate(fsm.ResetClient{Client: client, Audited: fsm.Audited{Actor: actor}})
}

// SetTier is the node's SetClientTier on g's leader.
func SetTier(ctx context.Context, g *raftgroup.Group, clk clock.Clock, client, tier, actor string) error {
	if err := CheckSetTier(client, tier, actor); err != nil {
		return err
	}
	_, err := g.ApplyLocal(ctx, fsm.SetTier{Client: client, Tier: tier, Audited: Audited(g, clk, actor)})
	return err
}

// Audited is who makes a change through g's leader, and when, as the
// entry carries it: nothing below fsm.ClusterVersionAudit, whose entries
// the release before must read; from it on, the actor (fsm.Anonymous if
// none) and this leader's time. The time is only recorded: it moves no
// group time, so a clock that is off cannot refill a bucket by it.
func Audited(g *raftgroup.Group, clk clock.Clock, actor string) fsm.Audited {
	if g.FSM.ClusterVersion() < fsm.ClusterVersionAudit {
		return fsm.Audited{}
	}
	return fsm.Audited{Stamp: clk.Now().UnixNano(), Actor: cmp.Or(actor, fsm.Anonymous)}
}

// Reset is the node's ResetClient on g's leader, which checks the cluster
// version again on its own replica: the leader proposes only what every
// replica of the group can apply. A replica that does not lead answers
// not-leader before anything else, so that the caller retries at the
// leader rather than take a lagging replica's version for the group's.
func Reset(ctx context.Context, g *raftgroup.Group, clk clock.Clock, client, actor string) (bool, error) {
	if err := CheckReset(client, actor); err != nil {
		return false, err
	}
	if !g.Serving() {
		return false, fmt.Errorf("%w: group %s", errs.ErrNotLeader, g.ID)
	}
	if v := g.FSM.ClusterVersion(); v < fsm.ClusterVersionPolicies {
		return false, fmt.Errorf("%w: group %s is at cluster version %d", errs.ErrClusterVersion, g.ID, v)
	}
	res, err := g.ApplyLocal(ctx, fsm.ResetClient{Client: client, Audited: Audited(g, clk, actor)})
	if err != nil {
		return false, err
	}
	out, ok := res.(*fsm.ResetResult)
	if !ok {
		return false, fmt.Errorf("group %s: unexpected apply result %T", g.ID, res)
	}
	return out.Existed, nil
}

// Handle registers on mux the internal RPCs of the per-client operations
// at a group's leader; groupFor is the client's group on this node and clk
// the stamp clock.
func Handle(mux *http.ServeMux, groupFor func(client string) *raftgroup.Group, clk clock.Clock) {
	peerrpc.Handle(mux, "/internal/client", func(ctx context.Context, req peerrpc.ClientReq) (peerrpc.WireClientView, error) {
		v, err := View(ctx, groupFor(req.Client), clk, req.Client)
		return peerrpc.ToWireClientView(v), err
	})
	peerrpc.Handle(mux, "/internal/set-tier", func(ctx context.Context, req peerrpc.ClientReq) (struct{}, error) {
		return struct{}{}, SetTier(ctx, groupFor(req.Client), clk, req.Client, req.Tier, req.Actor)
	})
	peerrpc.Handle(mux, "/internal/reset-client", func(ctx context.Context, req peerrpc.ClientReq) (bool, error) {
		if err := CheckReset(req.Client, req.Actor); err != nil {
			return false, err // before groupFor, which needs a valid client id
		}
		return Reset(ctx, groupFor(req.Client), clk, req.Client, req.Actor)
	})
}
