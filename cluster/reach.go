package cluster

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/cluster/raftgroup"
)

// cutOffAfter is how long a node may go without hearing from a majority of
// a group's voters before it takes itself for cut off from them. A node
// that can reach a majority hears from one of them every heartbeat tick (a
// third of the heartbeat timeout) through any group one of them leads or
// follows, and during an election within two heartbeat timeouts (a
// follower stands after one to two without its leader) and a round trip;
// two heartbeat timeouts without word is evidence of a cut, and costs a
// caller at most that before it is told to go elsewhere.
func cutOffAfter(t RaftTimings) time.Duration { return 2 * t.HeartbeatTimeout }

// lastHeard returns, for every peer, when this node last heard from it:
// the later of its last answer (reach) and, for a peer this node follows in
// some group, raft's last contact with that leader.
func (n *Node) lastHeard() map[string]time.Time {
	out := map[string]time.Time{}
	for _, g := range n.allGroups() {
		if g.Raft.State() != raft.Follower {
			continue
		}
		if addr, id := g.Raft.LeaderWithID(); id != "" && string(id) != n.opts.NodeID {
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
func (n *Node) heardFrom(g *raftgroup.Group, window time.Duration, followed map[string]time.Time) (heard, quorum int, voter bool) {
	servers, ok := n.servers(g)
	if !ok {
		return 0, 0, false
	}
	since := n.reach.Now().Add(-window)
	voters := 0
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		addr := string(s.Address)
		switch {
		case string(s.ID) == n.opts.NodeID:
			voter = true
			heard++
		case n.reach.Last(addr).After(since), followed[addr].After(since):
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

// servers returns g's configured servers, read from raft at most once per
// quarter of the reach window: leaseLapsed runs for every decision a
// leader takes, and raft's GetConfiguration is a round trip through the
// group's main loop. A set that old only delays when a judgment that
// decides nothing (refuse, or do not forward) notices a voter change.
func (n *Node) servers(g *raftgroup.Group) ([]raft.Server, bool) {
	now := n.reach.Now()
	if v, ok := n.serverSets.Load(g); ok {
		if set := v.(*serverSet); now.Sub(set.at) < n.reach.Window()/4 {
			return set.servers, true
		}
	}
	f := g.Raft.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	set := &serverSet{at: now, servers: f.Configuration().Servers}
	n.serverSets.Store(g, set)
	return set.servers, true
}

// cutOff returns an error wrapping ErrUnavailable if this node, a voter of
// g, has not heard from a majority of g's voters (itself included) for
// cutOffAfter: it can neither reach g's leader nor help elect one, so a
// request it holds would only wait out its caller's deadline. Nil if it
// may still reach one, or is no voter of g.
func (n *Node) cutOff(g *raftgroup.Group) error {
	if !n.reach.Awake() {
		return nil
	}
	w := n.reach.Window()
	heard, quorum, voter := n.heardFrom(g, w, n.lastHeard())
	if !voter || heard >= quorum {
		return nil
	}
	return fmt.Errorf("%w: group %s: this node has heard from %d of the %d voters a quorum needs (itself included) in the last %v: it is cut off from them",
		ErrUnavailable, g.ID, heard, quorum, w)
}

// leaseLapsed reports whether this node, leading g and awake, has not
// heard from a majority of g's voters within the leader lease: raft is about to step
// down, and an entry proposed now would most likely end ambiguous.
func (n *Node) leaseLapsed(g *raftgroup.Group) bool {
	if !n.reach.Awake() {
		return false
	}
	heard, quorum, voter := n.heardFrom(g, n.opts.Raft.LeaderLeaseTimeout, nil)
	return voter && heard < quorum
}

// leaderSilent reports whether a request for g should not be forwarded to
// addr, because it would most likely wait out its deadline there: addr is
// g's leader as this node's replica sees it and has not been heard from for
// a heartbeat timeout while this node was awake (raft is about to stand
// for election), or addr comes from gossip while this node is cut off.
func (n *Node) leaderSilent(g *raftgroup.Group, addr string) bool {
	if !n.reach.Awake() {
		return false
	}
	if a, id := g.Raft.LeaderWithID(); id == "" || string(a) != addr {
		// Gossip's view: it lags (a member stays alive, with the groups it
		// led, for seconds after it is cut off), so a voter of g cut off
		// from a majority of g's voters does not forward on its word.
		return n.cutOff(g) != nil
	}
	last := g.Raft.LastContact()
	if t := n.reach.Last(addr); t.After(last) {
		last = t
	}
	return n.reach.Now().Sub(last) > n.opts.Raft.HeartbeatTimeout
}
