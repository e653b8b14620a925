// Package placer applies, for every group this node leads, the placement
// that membership plans (membership.PlanPlacement, PreferredLeaders): it
// adds and removes voters and moves leadership to the group's preferred
// leader, one step per group and round, and hands every group over while
// the node leaves. It knows the node through the functions it is given.
package placer

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/versions"
)

// Config is what a Placer needs of its node.
type Config struct {
	Self     string // this node's id
	SelfAddr string // and raft address
	// Replicas is the voters a group should have (Options.Replicas).
	Replicas int
	// DeadAfter is how long a member is dead before its replicas move.
	DeadAfter time.Duration
	// Members returns the members placement may act on (proven, see
	// membership.Proofs).
	Members func() map[string]membership.Member
	// Groups returns every group of the node, the meta group first.
	Groups func() []*raftgroup.Group
	// ClockOff reports whether this node's clock is not in bounds (it then
	// hands its leadership over).
	ClockOff func() bool
	// Leaving reports whether the node is leaving the cluster.
	Leaving func() bool
	// ClusterVersion is the node's (a new voter must run it).
	ClusterVersion func() uint32
	// Reached reports whether the raft address answered this node lately
	// (within a heartbeat timeout); nil takes every address for reached.
	// Leadership moves only to a voter that did, and whose log the group
	// found caught up (raftgroup.Group.CaughtUp): gossip keeps a stopped or
	// cut-off node alive for seconds, and a transfer to it waits out an
	// election timeout during which the group takes no proposal.
	Reached func(addr string) bool
	// Logger receives every step taken or refused.
	Logger *slog.Logger
	// Now is the time membership's times are read against (how long a
	// member has been dead, when a group's leadership last moved); nil is
	// time.Now.
	Now func() time.Time
}

// transferEvery is how often at most a group's leadership is moved, so
// that a target that cannot take over is not hammered.
const transferEvery = 3 * time.Second

// Placer reconciles, for every group this node leads, the voters with
// membership and the leader with the group's preferred leader. Its Place
// method runs on one goroutine.
type Placer struct {
	cfg          Config
	lastTransfer map[string]time.Time
	rounds       atomic.Uint64
}

// New returns a placer of the node cfg describes.
func New(cfg Config) *Placer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Reached == nil {
		cfg.Reached = func(string) bool { return true }
	}
	return &Placer{cfg: cfg, lastTransfer: map[string]time.Time{}}
}

// Place runs one placement round over the groups this node leads.
func (p *Placer) Place() {
	v := membership.PlacementView{
		Self:      p.cfg.Self,
		SelfAddr:  p.cfg.SelfAddr,
		Replicas:  p.cfg.Replicas,
		DeadAfter: p.cfg.DeadAfter,
		Now:       p.cfg.Now(),
		Members:   p.cfg.Members(),

		SelfClockOff: p.cfg.ClockOff(),
	}
	groups := p.cfg.Groups()
	var ids []string
	for _, g := range groups {
		ids = append(ids, g.ID)
	}
	v.Preferred = membership.PreferredLeaders(ids, v.LiveIDs(), v.Replicas, v.LeaderCandidates()...)
	for _, g := range groups {
		if !g.Serving() {
			continue
		}
		p.placeGroup(g, v)
	}
	p.rounds.Add(1)
}

// Rounds returns how many rounds Place has run (for tests).
func (p *Placer) Rounds() uint64 { return p.rounds.Load() }

// placeGroup takes the next step of g's placement, which this node leads.
func (p *Placer) placeGroup(g *raftgroup.Group, v membership.PlacementView) {
	f := g.Raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	voters := raftgroup.VoterIDs(f.Configuration())
	var step membership.PlacementStep
	if p.cfg.Leaving() {
		step.Transfer = p.handOverTarget(v, voters)
	} else {
		step = membership.PlanPlacement(v, g.ID, voters)
	}
	timeout := 5 * time.Second
	switch {
	case step.Refused != "":
		p.cfg.Logger.Warn("not removing voter: the group would lose its live majority", "group", g.ID, "voter", step.Refused, "voters", voters)
	case step.Add != "" && !versions.MemberRuns(v.Members[step.Add], max(g.FSM.ClusterVersion(), p.cfg.ClusterVersion())):
		p.cfg.Logger.Warn("not adding voter: its binary cannot run the cluster version; upgrade it", "group", g.ID, "voter", step.Add,
			"cluster_version", max(g.FSM.ClusterVersion(), p.cfg.ClusterVersion()), "its_max", v.Members[step.Add].Meta.MaxClusterVersion, "its_version", v.Members[step.Add].Meta.Version)
	case step.Add != "":
		p.cfg.Logger.Info("adding voter", "group", g.ID, "voter", step.Add)
		if err := g.Raft.AddVoter(raft.ServerID(step.Add), raft.ServerAddress(v.Addr(step.Add)), 0, timeout).Error(); err != nil {
			p.cfg.Logger.Warn("add voter failed", "group", g.ID, "voter", step.Add, "err", err)
		}
	case step.Remove != "":
		p.cfg.Logger.Info("removing voter", "group", g.ID, "voter", step.Remove)
		if err := g.Raft.RemoveServer(raft.ServerID(step.Remove), 0, timeout).Error(); err != nil {
			p.cfg.Logger.Warn("remove voter failed", "group", g.ID, "voter", step.Remove, "err", err)
		}
	case step.Transfer != "":
		if last, ok := p.lastTransfer[g.ID]; ok && v.Now.Sub(last) < transferEvery {
			return
		}
		if to := v.Addr(step.Transfer); !p.cfg.Leaving() && (!p.cfg.Reached(to) || !g.CaughtUp(to)) {
			// The next round looks again; a leaving node tries anyway. A
			// target whose log is behind holds every proposal up while it
			// catches up, and one whose appends are failing can wedge
			// raft's transfer (raftgroup.Group.CaughtUp).
			return
		}
		p.lastTransfer[g.ID] = v.Now
		p.cfg.Logger.Info("transferring leadership", "group", g.ID, "to", step.Transfer)
		if err := g.Raft.LeadershipTransferToServer(raft.ServerID(step.Transfer), raft.ServerAddress(v.Addr(step.Transfer))).Error(); err != nil {
			p.cfg.Logger.Warn("leadership transfer failed", "group", g.ID, "to", step.Transfer, "err", err)
		}
	}
}

// handOverTarget is the voter a leaving node hands a group to: a live one
// that answered lately, else any live one.
func (p *Placer) handOverTarget(v membership.PlacementView, voters []string) string {
	fallback := ""
	for _, id := range voters {
		if id == v.Self || !v.Live(id) {
			continue
		}
		if p.cfg.Reached(v.Addr(id)) {
			return id
		}
		if fallback == "" {
			fallback = id
		}
	}
	return fallback
}
