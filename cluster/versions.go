package cluster

import (
	"context"

	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/versions"
	"github.com/quorate/quorate/fsm"
)

// ClusterVersion returns the highest cluster version any of this node's
// replicas has applied: the cluster committed at least that much (see
// package versions).
func (n *Node) ClusterVersion() uint32 { return n.versions.Current() }

// maxClusterVersion is the highest cluster version this node runs.
func (n *Node) maxClusterVersion() uint32 {
	if v := n.opts.maxClusterVersion; v != 0 {
		return v
	}
	return fsm.MaxClusterVersion
}

// newVersionGate is the node's cluster version gate (versions.Gate): its
// groups, gossip's members, and the meta leader asked over the internal
// RPC.
func (n *Node) newVersionGate() *versions.Gate {
	return &versions.Gate{
		Self:       n.opts.NodeID,
		Max:        n.maxClusterVersion(),
		Groups:     func() (*raftgroup.Group, []*raftgroup.Group) { return n.meta, n.groups },
		Members:    func() map[string]membership.Member { return n.members.Snapshot() },
		MetaLeader: func() (bool, string) { return n.router.LeaderOf(n.meta) },
		AskMeta: func(ctx context.Context, addr string) (uint32, error) {
			return peerrpc.Call[uint32](ctx, n.rpc, addr, "/internal/cluster-version", struct{}{})
		},
		Logger: n.logger,
	}
}

// allocateEpoch asks the meta group for an origin epoch of this process's
// own (origin.Source.Allocate). It runs with reconcile.
func (n *Node) allocateEpoch() {
	if e, ok := n.origins.Allocate(n.ClusterVersion(), n.meta, n.router.LeaderOf, n.rpc); ok {
		n.logger.Debug("origin epoch allocated", "epoch", e)
	}
}
