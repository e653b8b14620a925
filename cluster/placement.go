package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// rendezvous orders nodes by highest-random-weight hashing for group: the
// first R are the group's preferred replicas. Adding or removing a node
// moves only the groups whose top R it enters or leaves.
func rendezvous(group string, nodes []string) []string {
	type scored struct {
		id    string
		score uint64
	}
	s := make([]scored, len(nodes))
	for i, id := range nodes {
		h := fnv.New64a()
		var l [8]byte
		binary.BigEndian.PutUint64(l[:], uint64(len(group)))
		h.Write(l[:])
		h.Write([]byte(group))
		h.Write([]byte(id))
		s[i] = scored{id, h.Sum64()}
	}
	slices.SortFunc(s, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return cmpString(a.id, b.id)
	})
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.id
	}
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// placementView is what one reconciliation round of a group sees.
type placementView struct {
	self     string
	replicas int
	dead     time.Duration
	now      time.Time
	members  map[string]member // other nodes
	selfAddr string
	// preferred maps a group id to the node that should lead it.
	preferred map[string]string
	// selfClockOff is this node's own ClockOff (members carry theirs).
	selfClockOff bool
}

// liveIDs returns this node and every live member, sorted.
func (v placementView) liveIDs() []string {
	live := []string{v.self}
	for id := range v.members {
		if v.alive(id) {
			live = append(live, id)
		}
	}
	slices.Sort(live)
	return live
}

// leaderCandidates returns the live nodes that may lead: those whose
// clocks are within bounds (all of them if none is).
func (v placementView) leaderCandidates() []string {
	var out []string
	for _, id := range v.liveIDs() {
		off := v.selfClockOff
		if id != v.self {
			off = v.members[id].meta.ClockOff
		}
		if !off {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return v.liveIDs()
	}
	return out
}

// preferredLeaders assigns every group a preferred leader among its
// preferred replicas, greedily to the candidate leading the fewest groups so
// far (ties in rendezvous order), so that leaders spread evenly. Every node
// computes the same assignment from the same membership.
func preferredLeaders(groupIDs []string, live []string, replicas int, candidates ...string) map[string]string {
	want := min(replicas, len(live))
	count := map[string]int{}
	out := make(map[string]string, len(groupIDs))
	for _, g := range groupIDs {
		best := ""
		for _, id := range rendezvous(g, live)[:want] {
			if len(candidates) > 0 && !slices.Contains(candidates, id) {
				continue // may replicate, may not lead
			}
			if best == "" || count[id] < count[best] {
				best = id
			}
		}
		if best == "" { // no candidate among the replicas: the first may lead
			best = rendezvous(g, live)[0]
		}
		count[best]++
		out[g] = best
	}
	return out
}

func (v placementView) alive(id string) bool {
	if id == v.self {
		return true
	}
	m, ok := v.members[id]
	return ok && m.state == memberAlive && !m.meta.Leaving
}

// removable reports whether voter id should leave the group: it left or is
// leaving, or it has been dead for longer than the dead timeout.
func (v placementView) removable(id string) bool {
	if id == v.self {
		return false
	}
	m, ok := v.members[id]
	if !ok {
		return false // never seen: maybe gossip has not caught up
	}
	switch {
	case m.state == memberLeft || m.meta.Leaving:
		return true
	case m.state == memberDead:
		return v.now.Sub(m.since) >= v.dead
	}
	return false
}

func (v placementView) addr(id string) string {
	if id == v.self {
		return v.selfAddr
	}
	return v.members[id].meta.RaftAddr
}

// placementStep is one change to a group's voters, or a leadership move.
type placementStep struct {
	add, remove, transfer string
	refused               string // a removal refused to keep quorum, for the log
}

// planPlacement decides the next single change for a group this node leads,
// given its current voters. It adds preferred replicas that are missing,
// removes departed or long-dead voters (never below a live majority), trims
// surplus voters, and finally asks to hand leadership to the group's
// preferred leader so that leaders spread over the nodes.
func planPlacement(v placementView, groupID string, voters []string) placementStep {
	live := v.liveIDs()
	want := min(v.replicas, len(live))
	desired := rendezvous(groupID, live)[:want]

	// 1. Remove voters that left or died long ago, if a live majority of the
	// remaining configuration stays.
	for _, id := range voters {
		if !v.removable(id) {
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(voters), func(x string) bool { return x == id })
		aliveRest := 0
		for _, x := range rest {
			if v.alive(x) {
				aliveRest++
			}
		}
		if aliveRest < len(rest)/2+1 {
			return placementStep{refused: id}
		}
		return placementStep{remove: id}
	}
	// 2. Add preferred replicas that are missing.
	for _, id := range desired {
		if !slices.Contains(voters, id) {
			return placementStep{add: id}
		}
	}
	// 3. Trim voters beyond the replica count that are not preferred, once
	// every preferred replica is in (so the count never drops below R).
	if len(voters) > want {
		for _, id := range voters {
			if !slices.Contains(desired, id) && id != v.self && v.alive(id) {
				return placementStep{remove: id}
			}
		}
		if !slices.Contains(desired, v.self) {
			// This node itself is surplus: hand leadership to a preferred
			// replica; the new leader will remove it.
			return placementStep{transfer: desired[0]}
		}
	}
	// 4. Spread leaders: hand the group to its preferred leader if that is
	// a live voter.
	if pref := v.preferred[groupID]; pref != "" && pref != v.self && v.alive(pref) && slices.Contains(voters, pref) {
		return placementStep{transfer: pref}
	}
	return placementStep{}
}

// voterIDs returns the voters of a raft configuration, sorted.
func voterIDs(c raft.Configuration) []string {
	var ids []string
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			ids = append(ids, string(s.ID))
		}
	}
	slices.Sort(ids)
	return ids
}

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
	v := placementView{
		self:     n.opts.NodeID,
		selfAddr: n.raftAddr,
		replicas: n.opts.Replicas,
		dead:     n.opts.DeadAfter,
		now:      time.Now(),
		members:  n.trustedMembers(),

		selfClockOff: n.clockOff.Load(),
	}
	var ids []string
	for _, g := range n.allGroups() {
		ids = append(ids, g.id)
	}
	v.preferred = preferredLeaders(ids, v.liveIDs(), v.replicas, v.leaderCandidates()...)
	for _, g := range n.allGroups() {
		if !g.serving.Load() {
			continue
		}
		n.placeGroup(g, v, p.lastTransfer)
	}
	n.placements.Add(1)
}

func (n *Node) placeGroup(g *group, v placementView, lastTransfer map[string]time.Time) {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	voters := voterIDs(f.Configuration())
	var step placementStep
	if n.leaving.Load() {
		// Leaving: hand leadership to any other live voter.
		for _, id := range voters {
			if id != v.self && v.alive(id) {
				step.transfer = id
				break
			}
		}
	} else {
		step = planPlacement(v, g.id, voters)
	}
	timeout := 5 * time.Second
	switch {
	case step.refused != "":
		n.logger.Warn("not removing voter: the group would lose its live majority", "group", g.id, "voter", step.refused, "voters", voters)
	case step.add != "":
		n.logger.Info("adding voter", "group", g.id, "voter", step.add)
		if err := g.raft.AddVoter(raft.ServerID(step.add), raft.ServerAddress(v.addr(step.add)), 0, timeout).Error(); err != nil {
			n.logger.Warn("add voter failed", "group", g.id, "voter", step.add, "err", err)
		}
	case step.remove != "":
		n.logger.Info("removing voter", "group", g.id, "voter", step.remove)
		if err := g.raft.RemoveServer(raft.ServerID(step.remove), 0, timeout).Error(); err != nil {
			n.logger.Warn("remove voter failed", "group", g.id, "voter", step.remove, "err", err)
		}
	case step.transfer != "":
		// Move leadership at most every few seconds per group, so a target
		// that cannot take over is not hammered.
		if time.Since(lastTransfer[g.id]) < 3*time.Second {
			return
		}
		lastTransfer[g.id] = time.Now()
		n.logger.Info("transferring leadership", "group", g.id, "to", step.transfer)
		if err := g.raft.LeadershipTransferToServer(raft.ServerID(step.transfer), raft.ServerAddress(v.addr(step.transfer))).Error(); err != nil {
			n.logger.Warn("leadership transfer failed", "group", g.id, "to", step.transfer, "err", err)
		}
	}
}

// Leave removes this node from the cluster gracefully: it announces that it
// is leaving, hands over the groups it leads, waits until the leaders have
// removed it from every group (or ctx ends), leaves gossip and closes. The
// last node of a cluster just closes.
func (n *Node) Leave(ctx context.Context) error {
	n.leaving.Store(true)
	n.members.setLeaving()
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
	if err := n.members.leave(2 * time.Second); err != nil {
		n.logger.Warn("gossip leave", "err", err)
	}
	return n.Close()
}

// removedEverywhere reports whether no group's leader still counts this
// node as a voter. A group with no other live node cannot drop it.
func (n *Node) removedEverywhere(ctx context.Context) bool {
	alive := 0
	for _, m := range n.members.snapshot() {
		if m.state == memberAlive && !m.meta.Leaving {
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
		sts, err := callResult[[]GroupStatus](cctx, n.rpc, addr, "/internal/groups", struct{}{})
		cancel()
		if err != nil {
			return false
		}
		for _, st := range sts {
			if st.ID == g.id && slices.Contains(st.Voters, n.opts.NodeID) {
				return false
			}
		}
	}
	return true
}
