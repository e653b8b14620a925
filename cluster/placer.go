package cluster

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/versions"
)

// placer reconciles, for every group this node leads, the voters with
// membership and the leader with the group's preferred leader. Its place
// method runs on one goroutine.
type placer struct {
	n            *Node
	lastTransfer map[string]time.Time
}

func (n *Node) newPlacer() *placer {
	return &placer{n: n, lastTransfer: map[string]time.Time{}}
}

func (p *placer) place() {
	n := p.n
	v := membership.PlacementView{
		Self:      n.opts.NodeID,
		SelfAddr:  n.raftAddr,
		Replicas:  n.opts.Replicas,
		DeadAfter: n.opts.DeadAfter,
		Now:       time.Now(),
		Members:   n.trustedMembers(),

		SelfClockOff: n.clockGuard.State() != clock.InBounds,
	}
	var ids []string
	for _, g := range n.allGroups() {
		ids = append(ids, g.ID)
	}
	v.Preferred = membership.PreferredLeaders(ids, v.LiveIDs(), v.Replicas, v.LeaderCandidates()...)
	for _, g := range n.allGroups() {
		if !g.Serving() {
			continue
		}
		n.placeGroup(g, v, p.lastTransfer)
	}
	n.placements.Add(1)
}

func (n *Node) placeGroup(g *raftgroup.Group, v membership.PlacementView, lastTransfer map[string]time.Time) {
	f := g.Raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	voters := raftgroup.VoterIDs(f.Configuration())
	var step membership.PlacementStep
	if n.leaving.Load() {
		// Leaving: hand leadership to any other live voter.
		for _, id := range voters {
			if id != v.Self && v.Live(id) {
				step.Transfer = id
				break
			}
		}
	} else {
		step = membership.PlanPlacement(v, g.ID, voters)
	}
	timeout := 5 * time.Second
	switch {
	case step.Refused != "":
		n.logger.Warn("not removing voter: the group would lose its live majority", "group", g.ID, "voter", step.Refused, "voters", voters)
	case step.Add != "" && !versions.MemberRuns(v.Members[step.Add], max(g.FSM.ClusterVersion(), n.ClusterVersion())):
		n.logger.Warn("not adding voter: its binary cannot run the cluster version; upgrade it", "group", g.ID, "voter", step.Add,
			"cluster_version", max(g.FSM.ClusterVersion(), n.ClusterVersion()), "its_max", v.Members[step.Add].Meta.MaxClusterVersion, "its_version", v.Members[step.Add].Meta.Version)
	case step.Add != "":
		n.logger.Info("adding voter", "group", g.ID, "voter", step.Add)
		if err := g.Raft.AddVoter(raft.ServerID(step.Add), raft.ServerAddress(v.Addr(step.Add)), 0, timeout).Error(); err != nil {
			n.logger.Warn("add voter failed", "group", g.ID, "voter", step.Add, "err", err)
		}
	case step.Remove != "":
		n.logger.Info("removing voter", "group", g.ID, "voter", step.Remove)
		if err := g.Raft.RemoveServer(raft.ServerID(step.Remove), 0, timeout).Error(); err != nil {
			n.logger.Warn("remove voter failed", "group", g.ID, "voter", step.Remove, "err", err)
		}
	case step.Transfer != "":
		// Move leadership at most every few seconds per group, so a target
		// that cannot take over is not hammered.
		if time.Since(lastTransfer[g.ID]) < 3*time.Second {
			return
		}
		lastTransfer[g.ID] = time.Now()
		n.logger.Info("transferring leadership", "group", g.ID, "to", step.Transfer)
		if err := g.Raft.LeadershipTransferToServer(raft.ServerID(step.Transfer), raft.ServerAddress(v.Addr(step.Transfer))).Error(); err != nil {
			n.logger.Warn("leadership transfer failed", "group", g.ID, "to", step.Transfer, "err", err)
		}
	}
}

// Leave removes this node from the cluster gracefully: it announces that it
// is leaving, hands over the groups it leads, waits until the leaders have
// removed it from every group (or ctx ends), leaves gossip and closes. The
// last node of a cluster just closes.
func (n *Node) Leave(ctx context.Context) error {
	n.leaving.Store(true)
	n.members.SetLeaving()
	kick(n.placementCh)
	for {
		if n.removedEverywhere(ctx) {
			break
		}
		select {
		case <-ctx.Done():
			n.logger.Warn("leave: still a voter of some groups; closing anyway", "err", ctx.Err())
			return errors.Join(ctx.Err(), n.closeAfterLeave())
		case <-time.After(100 * time.Millisecond):
			kick(n.placementCh)
		}
	}
	return n.closeAfterLeave()
}

func (n *Node) closeAfterLeave() error {
	if err := n.members.Leave(2 * time.Second); err != nil {
		n.logger.Warn("gossip leave", "err", err)
	}
	return n.Close()
}

// removedEverywhere reports whether no group's leader still counts this
// node as a voter. A group with no other live node cannot drop it.
func (n *Node) removedEverywhere(ctx context.Context) bool {
	alive := 0
	for _, m := range n.members.Snapshot() {
		if m.State == membership.Alive && !m.Meta.Leaving {
			alive++
		}
	}
	if alive == 0 {
		return true // the last node: nobody to hand over to
	}
	for _, g := range n.allGroups() {
		self, addr := n.leaderOf(g)
		if self {
			return false // still leading: the transfer has not happened yet
		}
		if addr == "" {
			return false
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		sts, err := peerrpc.Call[[]peerrpc.WireGroupStatus](cctx, n.rpc, addr, "/internal/groups", struct{}{})
		cancel()
		if err != nil {
			return false
		}
		for _, st := range sts {
			if st.ID == g.ID && slices.Contains(st.Voters, n.opts.NodeID) {
				return false
			}
		}
	}
	return true
}
