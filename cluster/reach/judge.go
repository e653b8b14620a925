package reach

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/raftgroup"
)

// Judge puts a Tracker together with raft's view of this node's groups
// (their voters, the leaders it follows) to judge whether this node can
// reach a group's quorum: CutOff (a caller is told to go elsewhere),
// LeaseLapsed (a leader proposes nothing), LeaderSilent (a follower does
// not forward) and LiveVoters (whom a stopping leader hands over to). Its
// methods are safe for concurrent use.
type Judge struct {
	*Tracker
	self    string // this node's id
	timings raftgroup.Timings
	groups  func() []*raftgroup.Group // every group of the node
	// sets caches each group's raft configuration (*serverSet, see
	// Servers) for the judgments on the decision path.
	sets sync.Map
}

// NewJudge returns the judge of node self, whose groups use timings and
// are listed by groups; it starts a Tracker of its own (New) that reads
// the time with now and judges over CutOffAfter(timings).
func NewJudge(now func() time.Time, self string, timings raftgroup.Timings, groups func() []*raftgroup.Group) *Judge {
	return &Judge{Tracker: New(now, CutOffAfter(timings)), self: self, timings: timings, groups: groups}
}

// CutOffAfter is how long a node may go without hearing from a majority of
// a group's voters before it takes itself for cut off from them. A node
// that can reach a majority hears from one of them every heartbeat tick (a
// third of the heartbeat timeout) through any group one of them leads or
// follows, and during an election within two heartbeat timeouts (a
// follower stands after one to two without its leader) and a round trip;
// two heartbeat timeouts without word is evidence of a cut, and costs a
// caller at most that before it is told to go elsewhere.
func CutOffAfter(t raftgroup.Timings) time.Duration { return 2 * t.HeartbeatTimeout }

// lastHeard returns, for every peer, when this node last heard from it:
// the later of its last answer (reach) and, for a peer this node follows in
// some group, raft's last contact with that leader.
func (j *Judge) lastHeard() map[string]time.Time {
	out := map[string]time.Time{}
	for _, g := range j.groups() {
		if g.Raft.State() != raft.Follower {
			continue
		}
		if addr, id := g.Raft.LeaderWithID(); id != "" && string(id) != j.self {
			if t := g.Raft.LastContact(); t.After(out[string(addr)]) {
				out[string(addr)] = t
			}
		}
	}
	return out
}

// heardFrom reports how many of g's voters, this node included if it is
// one, were heard from within the last window, against how many make a
// quorum; voter is false if this node is not one of g's voters (it then
// knows too little of g to judge).
func (j *Judge) heardFrom(g *raftgroup.Group, window time.Duration, followed map[string]time.Time) (heard, quorum int, voter bool) {
	servers, ok := j.Servers(g)
	if !ok {
		return 0, 0, false
	}
	since := j.Now().Add(-window)
	voters := 0
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		addr := string(s.Address)
		switch {
		case string(s.ID) == j.self:
			voter = true
			heard++
		case j.Last(addr).After(since), followed[addr].After(since):
			heard++
		}
	}
	return heard, voters/2 + 1, voter
}

// serverSet is a group's raft configuration as read at a moment.
type serverSet struct {
	at      time.Time
	servers []raft.Server
}

// Servers returns g's configured servers, read from raft at most once per
// quarter of the reach window: LeaseLapsed runs for every decision a
// leader takes, and raft's GetConfiguration is a round trip through the
// group's main loop. A set that old only delays when a judgment that
// decides nothing (refuse, or do not forward) notices a voter change.
func (j *Judge) Servers(g *raftgroup.Group) ([]raft.Server, bool) {
	now := j.Now()
	if v, ok := j.sets.Load(g); ok {
		if set := v.(*serverSet); now.Sub(set.at) < j.Window()/4 {
			return set.servers, true
		}
	}
	f := g.Raft.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	set := &serverSet{at: now, servers: f.Configuration().Servers}
	j.sets.Store(g, set)
	return set.servers, true
}

// CutOff returns an error wrapping errs.ErrUnavailable if this node, a
// voter of g, has not heard from a majority of g's voters (itself
// included) for CutOffAfter: it can neither reach g's leader nor help elect one, so a
// request it holds would only wait out its caller's deadline. Nil if it
// may still reach one, or is no voter of g.
func (j *Judge) CutOff(g *raftgroup.Group) error {
	if !j.Awake() {
		return nil
	}
	w := j.Window()
	heard, quorum, voter := j.heardFrom(g, w, j.lastHeard())
	if !voter || heard >= quorum {
		return nil
	}
	return fmt.Errorf("%w: group %s: this node has heard from %d of the %d voters a quorum needs (itself included) in the last %v: it is cut off from them",
		errs.ErrUnavailable, g.ID, heard, quorum, w)
}

// LeaseLapsed reports whether this node, leading g and awake, has not
// heard from a majority of g's voters within the leader lease: raft is about to step
// down, and an entry proposed now would most likely end ambiguous.
func (j *Judge) LeaseLapsed(g *raftgroup.Group) bool {
	if !j.Awake() {
		return false
	}
	heard, quorum, voter := j.heardFrom(g, j.timings.LeaderLeaseTimeout, nil)
	return voter && heard < quorum
}

// LeaderSilent reports whether a request for g should not be forwarded to
// addr, because it would most likely wait out its deadline there: addr is
// g's leader as this node's replica sees it and has not been heard from for
// a heartbeat timeout while this node was awake (raft is about to stand
// for election), or addr comes from gossip while this node is cut off.
func (j *Judge) LeaderSilent(g *raftgroup.Group, addr string) bool {
	if !j.Awake() {
		return false
	}
	if a, id := g.Raft.LeaderWithID(); id == "" || string(a) != addr {
		// Gossip's view: it lags (a member stays alive, with the groups it
		// led, for seconds after it is cut off), so a voter of g cut off
		// from a majority of g's voters does not forward on its word.
		return j.CutOff(g) != nil
	}
	last := g.Raft.LastContact()
	if t := j.Last(addr); t.After(last) {
		last = t
	}
	return j.Now().Sub(last) > j.timings.HeartbeatTimeout
}

// LiveVoters returns g's voters other than this node that it has heard from
// within the reach window, the most recently heard first, and false if g's
// configuration cannot be read.
func (j *Judge) LiveVoters(g *raftgroup.Group) ([]raft.Server, bool) {
	servers, ok := j.Servers(g)
	if !ok {
		return nil, false
	}
	since := j.Now().Add(-j.Window())
	var live []raft.Server
	for _, s := range servers {
		if s.Suffrage == raft.Voter && string(s.ID) != j.self && j.Last(string(s.Address)).After(since) {
			live = append(live, s)
		}
	}
	slices.SortFunc(live, func(a, b raft.Server) int {
		return j.Last(string(b.Address)).Compare(j.Last(string(a.Address)))
	})
	return live, true
}
