package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
)

// A cluster version says which log entries, snapshot formats and rules of
// apply the cluster uses (fsm.BaseClusterVersion .. fsm.MaxClusterVersion).
// It lives in every group's state. The meta group's leader raises the meta
// group's version once every member can run the next one (its gossip says
// so, see supportedClusterVersion); then the leader of each data group
// raises that group's to the meta group's, in the group's own log, as
// configuration changes reach it. A node of a newer binary in an older
// cluster therefore writes only what the older binaries read until the
// last of them is gone, and a node whose binary runs less than a group's
// version is never added to it.

// ClusterVersion returns the highest cluster version any of this node's
// replicas has applied: the cluster committed at least that much.
func (n *Node) ClusterVersion() uint32 {
	v := n.meta.FSM.ClusterVersion()
	for _, g := range n.groups {
		v = max(v, g.FSM.ClusterVersion())
	}
	return v
}

// supportedClusterVersion returns the highest cluster version every member
// can run, and the id of a member that holds it there (empty when it is this
// binary's own maximum). Members are every gossip member that has not left
// and every server of a raft configuration this node sees; one gossip does
// not describe is assumed to run only the base version.
func (n *Node) supportedClusterVersion() (uint32, string) {
	v, by := n.maxClusterVersion(), ""
	lower := func(mv uint32, id string) {
		if mv < v {
			v, by = mv, id
		}
	}
	known := map[string]bool{n.opts.NodeID: true}
	for id, m := range n.members.Snapshot() {
		if m.State == membership.Left {
			continue
		}
		known[id] = true
		lower(max(m.Meta.MaxClusterVersion, fsm.BaseClusterVersion), id)
	}
	for _, g := range n.allGroups() {
		f := g.Raft.GetConfiguration()
		if f.Error() != nil {
			return fsm.BaseClusterVersion, n.opts.NodeID
		}
		for _, s := range f.Configuration().Servers {
			if !known[string(s.ID)] {
				lower(fsm.BaseClusterVersion, string(s.ID))
			}
		}
	}
	return v, by
}

// raiseClusterVersion moves the cluster version up where this node leads:
// the meta group's to what every member supports, and every data group's
// to the meta group's. It runs with reconcile.
func (n *Node) raiseClusterVersion() {
	top := n.maxClusterVersion()
	if n.meta.Serving() && n.meta.FSM.ClusterVersion() < top {
		want, by := n.supportedClusterVersion()
		if have := n.meta.FSM.ClusterVersion(); want > have {
			n.applyClusterVersion(n.meta, want, "the cluster version moved up: every member runs it")
		} else if by != "" {
			n.logger.Debug("cluster version held back", "version", have, "by", by)
		}
	}
	// Only groups below this binary's highest version can move: once every
	// group served here is there, nothing is asked of the meta group.
	var behind []*raftgroup.Group
	for _, g := range n.groups {
		if g.Serving() && g.FSM.ClusterVersion() < top {
			behind = append(behind, g)
		}
	}
	if len(behind) == 0 {
		return
	}
	target := n.committedClusterVersion()
	for _, g := range behind {
		if g.FSM.ClusterVersion() < target && n.votersRun(g, target) {
			n.applyClusterVersion(g, target, "")
		}
	}
}

// votersRun reports whether every voter of g is known, through gossip, to
// run cluster version v. The meta group moved only once every member did,
// but a node that joined since (refused by placement, see placeGroup) may
// have become a voter of a group still behind.
func (n *Node) votersRun(g *raftgroup.Group, v uint32) bool {
	f := g.Raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	members := n.members.Snapshot()
	for _, id := range voterIDs(f.Configuration()) {
		if id == n.opts.NodeID {
			continue
		}
		if m, ok := members[id]; !ok || !memberRuns(m, v) {
			return false
		}
	}
	return n.maxClusterVersion() >= v
}

func (n *Node) applyClusterVersion(g *raftgroup.Group, v uint32, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := g.ApplyLocal(ctx, fsm.SetClusterVersion{Version: v}); err != nil {
		n.logger.Warn("raising the cluster version failed; retried at the next reconcile", "group", g.ID, "version", v, "err", err)
		return
	}
	if why != "" {
		n.logger.Info(why, "version", v)
	}
}

// committedClusterVersion is the meta group's cluster version: this node's
// replica's, or the meta leader's when it holds no replica.
func (n *Node) committedClusterVersion() uint32 {
	v := n.meta.FSM.ClusterVersion()
	if isVoter(n.meta, n.opts.NodeID) {
		return v
	}
	self, addr := n.leaderOf(n.meta)
	if self || addr == "" {
		return v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// A meta leader of the release before has no such call: the base version.
	if theirs, err := peerrpc.Call[uint32](ctx, n.rpc, addr, "/internal/cluster-version", struct{}{}); err == nil {
		v = max(v, min(theirs, fsm.MaxClusterVersion))
	}
	return v
}

// maxClusterVersion is the highest cluster version this node runs.
func (n *Node) maxClusterVersion() uint32 {
	if v := n.opts.maxClusterVersion; v != 0 {
		return v
	}
	return fsm.MaxClusterVersion
}

// allocateEpoch asks the meta group for an origin epoch of this process's
// own (origin.Source.Allocate), its leader over /internal/epoch when this
// node does not lead it. It runs with reconcile.
func (n *Node) allocateEpoch() {
	e, ok := n.origins.Allocate(n.ClusterVersion(), n.meta, func(ctx context.Context) (uint32, error) {
		self, addr := n.leaderOf(n.meta)
		if self || addr == "" {
			return 0, fmt.Errorf("%w: no meta leader to ask for an epoch", errNotLeader)
		}
		return peerrpc.Call[uint32](ctx, n.rpc, addr, "/internal/epoch", struct{}{})
	})
	if ok {
		n.logger.Debug("origin epoch allocated", "epoch", e)
	}
}

// memberRuns reports whether member id's binary can run cluster version v.
func memberRuns(m membership.Member, v uint32) bool {
	return max(m.Meta.MaxClusterVersion, fsm.BaseClusterVersion) >= v
}
