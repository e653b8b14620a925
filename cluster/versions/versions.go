// Package versions is the cluster version gate: which cluster version
// every member can run, and moving the groups this node leads up to it.
//
// A cluster version says which log entries, snapshot formats and rules of
// apply the cluster uses (fsm.BaseClusterVersion .. fsm.MaxClusterVersion).
// It lives in every group's state. The meta group's leader raises the meta
// group's version once every member can run the next one (its gossip says
// so, see Gate.Supported); then the leader of each data group raises that
// group's to the meta group's, in the group's own log, as configuration
// changes reach it. A node of a newer binary in an older cluster therefore
// writes only what the older binaries read until the last of them is gone,
// and a node whose binary runs less than a group's version is never added
// to it (MemberRuns, which placement asks).
package versions

import (
	"context"
	"log/slog"
	"time"

	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
)

// Gate is one node's side of the cluster version. It knows the node through
// the functions it is given; its methods are safe for concurrent use, and
// Raise runs on one goroutine (the node's reconcile).
type Gate struct {
	// Self is this node's id.
	Self string
	// Max is the highest cluster version this node's binary runs.
	Max uint32
	// Groups returns the meta group and the data groups opened so far.
	Groups func() (meta *raftgroup.Group, data []*raftgroup.Group)
	// Members returns gossip's members (not only the proven ones: a
	// member's claim can only hold the version back).
	Members func() map[string]membership.Member
	// MetaLeader says where the meta group is served (the node's
	// leaderOf).
	MetaLeader func() (self bool, addr string)
	// AskMeta asks the meta group's leader at addr for its cluster
	// version (/internal/cluster-version).
	AskMeta func(ctx context.Context, addr string) (uint32, error)
	// Logger receives the version's moves.
	Logger *slog.Logger
}

// Current returns the highest cluster version any of this node's replicas
// has applied: the cluster committed at least that much.
func (v *Gate) Current() uint32 {
	meta, data := v.Groups()
	cv := meta.FSM.ClusterVersion()
	for _, g := range data {
		cv = max(cv, g.FSM.ClusterVersion())
	}
	return cv
}

// Supported returns the highest cluster version every member can run, and
// the id of a member that holds it there (empty when it is this binary's
// own maximum). Members are every gossip member that has not left and
// every server of a raft configuration this node sees; one gossip does not
// describe is assumed to run only the base version.
func (v *Gate) Supported() (uint32, string) {
	cv, by := v.Max, ""
	lower := func(mv uint32, id string) {
		if mv < cv {
			cv, by = mv, id
		}
	}
	known := map[string]bool{v.Self: true}
	for id, m := range v.Members() {
		if m.State == membership.Left {
			continue
		}
		known[id] = true
		lower(max(m.Meta.MaxClusterVersion, fsm.BaseClusterVersion), id)
	}
	meta, data := v.Groups()
	for _, g := range append([]*raftgroup.Group{meta}, data...) {
		f := g.Raft.GetConfiguration()
		if f.Error() != nil {
			return fsm.BaseClusterVersion, v.Self
		}
		for _, s := range f.Configuration().Servers {
			if !known[string(s.ID)] {
				lower(fsm.BaseClusterVersion, string(s.ID))
			}
		}
	}
	return cv, by
}

// Raise moves the cluster version up where this node leads: the meta
// group's to what every member supports, and every data group's to the
// meta group's. It runs with the node's reconcile.
func (v *Gate) Raise() {
	meta, data := v.Groups()
	top := v.Max
	if meta.Serving() && meta.FSM.ClusterVersion() < top {
		want, by := v.Supported()
		if have := meta.FSM.ClusterVersion(); want > have {
			v.Apply(meta, want, "the cluster version moved up: every member runs it")
		} else if by != "" {
			v.Logger.Debug("cluster version held back", "version", have, "by", by)
		}
	}
	// Only groups below this binary's highest version can move: once every
	// group served here is there, nothing is asked of the meta group.
	var behind []*raftgroup.Group
	for _, g := range data {
		if g.Serving() && g.FSM.ClusterVersion() < top {
			behind = append(behind, g)
		}
	}
	if len(behind) == 0 {
		return
	}
	target := v.Committed()
	for _, g := range behind {
		if g.FSM.ClusterVersion() < target && v.VotersRun(g, target) {
			v.Apply(g, target, "")
		}
	}
}

// VotersRun reports whether every voter of g is known, through gossip, to
// run cluster version cv. The meta group moved only once every member did,
// but a node that joined since (refused by placement) may have become a
// voter of a group still behind.
func (v *Gate) VotersRun(g *raftgroup.Group, cv uint32) bool {
	f := g.Raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	members := v.Members()
	for _, id := range raftgroup.VoterIDs(f.Configuration()) {
		if id == v.Self {
			continue
		}
		if m, ok := members[id]; !ok || !MemberRuns(m, cv) {
			return false
		}
	}
	return v.Max >= cv
}

// Apply proposes cluster version cv in g, which this node leads, and logs
// why (if not empty) once it is applied; a failure is logged and retried at
// the next reconcile.
func (v *Gate) Apply(g *raftgroup.Group, cv uint32, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := g.ApplyLocal(ctx, fsm.SetClusterVersion{Version: cv}); err != nil {
		v.Logger.Warn("raising the cluster version failed; retried at the next reconcile", "group", g.ID, "version", cv, "err", err)
		return
	}
	if why != "" {
		v.Logger.Info(why, "version", cv)
	}
}

// Committed is the meta group's cluster version: this node's replica's, or
// the meta leader's when it holds no replica.
func (v *Gate) Committed() uint32 {
	meta, _ := v.Groups()
	cv := meta.FSM.ClusterVersion()
	if meta.IsVoter(v.Self) {
		return cv
	}
	self, addr := v.MetaLeader()
	if self || addr == "" {
		return cv
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// A meta leader of the release before has no such call: the base version.
	if theirs, err := v.AskMeta(ctx, addr); err == nil {
		cv = max(cv, min(theirs, fsm.MaxClusterVersion))
	}
	return cv
}

// MemberRuns reports whether member m's binary can run cluster version cv.
func MemberRuns(m membership.Member, cv uint32) bool {
	return max(m.Meta.MaxClusterVersion, fsm.BaseClusterVersion) >= cv
}
