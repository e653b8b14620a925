package cluster

import (
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/route"
)

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

// RoutesVersion is Routes().Version, the sum of the data groups' raft
// terms, without building the routes: a few atomic loads, for every
// decision answer.
func (n *Node) RoutesVersion() uint64 { return route.Version(n.groups) }

// Routes returns this node's view of every data group's leader.
func (n *Node) Routes() Routes { return n.router.Routes(n.groups, n.opts.HTTPAddr) }
