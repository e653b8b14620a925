package membership

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"time"
)

// Rendezvous orders nodes by highest-random-weight hashing for group: the
// first R are the group's preferred replicas. Adding or removing a node
// moves only the groups whose top R it enters or leaves.
func Rendezvous(group string, nodes []string) []string {
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

// PlacementView is what one reconciliation round of a group sees.
type PlacementView struct {
	Self      string
	Replicas  int
	DeadAfter time.Duration // how long a member must be dead to be removed
	Now       time.Time
	Members   map[string]Member // other nodes
	SelfAddr  string
	// Preferred maps a group id to the node that should lead it.
	Preferred map[string]string
	// SelfClockOff is this node's own ClockOff (members carry theirs).
	SelfClockOff bool
}

// LiveIDs returns this node and every live member, sorted.
func (v PlacementView) LiveIDs() []string {
	live := []string{v.Self}
	for id := range v.Members {
		if v.Live(id) {
			live = append(live, id)
		}
	}
	slices.Sort(live)
	return live
}

// LeaderCandidates returns the live nodes that may lead: those whose
// clocks are within bounds (all of them if none is).
func (v PlacementView) LeaderCandidates() []string {
	var out []string
	for _, id := range v.LiveIDs() {
		off := v.SelfClockOff
		if id != v.Self {
			off = v.Members[id].Meta.ClockOff
		}
		if !off {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return v.LiveIDs()
	}
	return out
}

// PreferredLeaders assigns every group a preferred leader among its
// preferred replicas, greedily to the candidate leading the fewest groups so
// far (ties in rendezvous order), so that leaders spread evenly. Every node
// computes the same assignment from the same membership.
func PreferredLeaders(groupIDs []string, live []string, replicas int, candidates ...string) map[string]string {
	want := min(replicas, len(live))
	count := map[string]int{}
	out := make(map[string]string, len(groupIDs))
	for _, g := range groupIDs {
		best := ""
		for _, id := range Rendezvous(g, live)[:want] {
			if len(candidates) > 0 && !slices.Contains(candidates, id) {
				continue // may replicate, may not lead
			}
			if best == "" || count[id] < count[best] {
				best = id
			}
		}
		if best == "" { // no candidate among the replicas: the first may lead
			best = Rendezvous(g, live)[0]
		}
		count[best]++
		out[g] = best
	}
	return out
}

// Live reports whether id is this node or a member gossip reaches that
// has not said it is leaving.
func (v PlacementView) Live(id string) bool {
	if id == v.Self {
		return true
	}
	m, ok := v.Members[id]
	return ok && m.State == Alive && !m.Meta.Leaving
}

// removable reports whether voter id should leave the group: it left or is
// leaving, or it has been dead for longer than the dead timeout.
func (v PlacementView) removable(id string) bool {
	if id == v.Self {
		return false
	}
	m, ok := v.Members[id]
	if !ok {
		return false // never seen: maybe gossip has not caught up
	}
	switch {
	case m.State == Left || m.Meta.Leaving:
		return true
	case m.State == Dead:
		return v.Now.Sub(m.Since) >= v.DeadAfter
	}
	return false
}

// Addr returns the raft address of node id.
func (v PlacementView) Addr(id string) string {
	if id == v.Self {
		return v.SelfAddr
	}
	return v.Members[id].Meta.RaftAddr
}

// PlacementStep is one change to a group's voters, or a leadership move.
type PlacementStep struct {
	Add, Remove, Transfer string
	Refused               string // a removal refused to keep quorum, for the log
}

// PlanPlacement decides the next single change for a group this node leads,
// given its current voters. It adds preferred replicas that are missing,
// removes departed or long-dead voters (never below a live majority), trims
// surplus voters, and finally asks to hand leadership to the group's
// preferred leader so that leaders spread over the nodes.
func PlanPlacement(v PlacementView, groupID string, voters []string) PlacementStep {
	live := v.LiveIDs()
	want := min(v.Replicas, len(live))
	desired := Rendezvous(groupID, live)[:want]

	// 1. Remove voters that left or died long ago, if a live majority of the
	// remaining configuration stays.
	for _, id := range voters {
		if !v.removable(id) {
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(voters), func(x string) bool { return x == id })
		aliveRest := 0
		for _, x := range rest {
			if v.Live(x) {
				aliveRest++
			}
		}
		if aliveRest < len(rest)/2+1 {
			return PlacementStep{Refused: id}
		}
		return PlacementStep{Remove: id}
	}
	// 2. Add preferred replicas that are missing.
	for _, id := range desired {
		if !slices.Contains(voters, id) {
			return PlacementStep{Add: id}
		}
	}
	// 3. Trim voters beyond the replica count that are not preferred, once
	// every preferred replica is in (so the count never drops below R).
	if len(voters) > want {
		for _, id := range voters {
			if !slices.Contains(desired, id) && id != v.Self && v.Live(id) {
				return PlacementStep{Remove: id}
			}
		}
		if !slices.Contains(desired, v.Self) {
			// This node itself is surplus: hand leadership to a preferred
			// replica; the new leader will remove it.
			return PlacementStep{Transfer: desired[0]}
		}
	}
	// 4. Spread leaders: hand the group to its preferred leader if that is
	// a live voter.
	if pref := v.Preferred[groupID]; pref != "" && pref != v.Self && v.Live(pref) && slices.Contains(voters, pref) {
		return PlacementStep{Transfer: pref}
	}
	return PlacementStep{}
}
