package cluster

import (
	"context"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/route"
)

// errNotLeader means the request reached a node that does not serve the
// group: nothing was appended, so it is safe to retry at the leader (see
// errs.ErrNotLeader).
var errNotLeader = errs.ErrNotLeader

// Routes says where each data group is decided, for callers that send each
// decision straight to its group's leader (GET /v1/routes): see
// route.Routes.
type Routes = route.Routes

// newRouter is the node's route.Router: gossip's members once it runs, the
// proofs, the reach judge and the node's stop.
func (n *Node) newRouter() *route.Router {
	return &route.Router{
		Self: n.opts.NodeID,
		Members: func() (map[string]membership.Member, bool) {
			if n.members == nil {
				return nil, false
			}
			return n.members.Snapshot(), true
		},
		Proofs: n.proofs,
		Reach:  n.reach,
		Stop:   n.stop,
	}
}

// leaderOf returns where group g is served (route.Router.LeaderOf).
func (n *Node) leaderOf(g *raftgroup.Group) (self bool, addr string) { return n.router.LeaderOf(g) }

// atLeader runs local if this node serves g, or remote with the leader's
// address otherwise, until one answers other than errNotLeader
// (route.Router.AtLeader).
func (n *Node) atLeader(ctx context.Context, g *raftgroup.Group, local func() error, remote func(addr string) error) error {
	return n.router.AtLeader(ctx, g, local, remote)
}

// RoutesVersion is Routes().Version, the sum of the data groups' raft
// terms, without building the routes: a few atomic loads, for every
// decision answer.
func (n *Node) RoutesVersion() uint64 { return route.Version(n.groups) }

// Routes returns this node's view of every data group's leader.
func (n *Node) Routes() Routes { return n.router.Routes(n.groups, n.opts.HTTPAddr) }
