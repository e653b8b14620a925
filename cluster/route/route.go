// Package route finds where a group is served and runs a request there:
// this node if it serves the group, raft's leader or, for a node that
// holds no replica, the leader gossip names (Router.LeaderOf); retrying
// while nothing was appended and giving up at once when this node is cut
// off (Router.AtLeader); and the table of every data group's leader that
// callers route by themselves with (Routes).
package route

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/reach"
)

// Router is one node's routing. Its methods are safe for concurrent use.
type Router struct {
	// Self is this node's id.
	Self string
	// Members returns gossip's members, and false while gossip is not
	// running.
	Members func() (map[string]membership.Member, bool)
	// Proofs says which members proved their id (nil: all are trusted).
	Proofs *membership.Proofs
	// Reach judges whether this node can reach a group's quorum.
	Reach *reach.Judge
	// Stop is closed when the node stops.
	Stop <-chan struct{}
}

// LeaderOf returns where group g is served: self, or the raft address of
// another node ("" if no leader is known). Raft's own view wins; a node
// that is not a voter of g learns the leader from gossip.
func (r *Router) LeaderOf(g *raftgroup.Group) (self bool, addr string) {
	if g.Serving() {
		return true, ""
	}
	if a, id := g.Raft.LeaderWithID(); id != "" && string(id) != r.Self {
		return false, string(a)
	}
	members, ok := r.Members()
	if !ok {
		return false, ""
	}
	for _, mb := range members {
		if mb.State == membership.Alive && g.Index < len(mb.Leads) && mb.Leads[g.Index] && r.Proofs.Trusts(mb.Meta.ID, mb.Meta.RaftAddr) {
			return false, mb.Meta.RaftAddr
		}
	}
	return false, ""
}

// AtLeader runs local if this node serves g, or remote with the leader's
// address otherwise, retrying while the answer is errs.ErrNotLeader (nothing was
// appended) until ctx is done. With no leader known it waits for one, unless
// this node is cut off from a majority of g's voters (reach.Judge.CutOff): then no
// leader it can reach is coming, and it answers ErrUnavailable at once
// (nothing was decided) so that the caller tries another node. It neither
// proposes as a leader whose lease has lapsed nor forwards to a leader it
// has not heard from for a heartbeat timeout: both would most likely hold
// the request until the deadline and end ambiguous.
func (r *Router) AtLeader(ctx context.Context, g *raftgroup.Group, local func() error, remote func(addr string) error) error {
	backoff := 5 * time.Millisecond
	for {
		self, addr := r.LeaderOf(g)
		var err error
		switch {
		case self && r.Reach.LeaseLapsed(g):
			err = fmt.Errorf("%w: group %s: leads, but has not heard from a majority within the lease", errs.ErrNotLeader, g.ID)
		case self:
			err = local()
		case addr != "" && r.Reach.LeaderSilent(g, addr):
			err = fmt.Errorf("%w: group %s: its leader %s has been silent for a heartbeat timeout", errs.ErrNotLeader, g.ID, addr)
		case addr != "":
			err = remote(addr)
		default:
			err = fmt.Errorf("%w: group %s has no leader", errs.ErrNotLeader, g.ID)
		}
		if err == nil || !errors.Is(err, errs.ErrNotLeader) {
			return err
		}
		if cut := r.Reach.CutOff(g); cut != nil {
			return fmt.Errorf("%w (last: %v)", cut, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: group %s: %w (last: %v)", errs.ErrUnavailable, g.ID, ctx.Err(), err)
		case <-r.Stop:
			return errs.ErrShuttingDown
		case <-g.LeadershipChanged():
		case <-time.After(backoff):
			backoff = min(2*backoff, 100*time.Millisecond)
		}
	}
}

// Proposes says whether this node may propose for g now, as AtLeader's
// local branch would: it leads g and has heard from a majority within
// the lease.
func (r *Router) Proposes(g *raftgroup.Group) bool {
	self, _ := r.LeaderOf(g)
	return self && !r.Reach.LeaseLapsed(g)
}

// Routes says where each data group is decided, for callers that send each
// decision straight to its group's leader (GET /v1/routes). A stale table
// costs one hop: a node that does not lead a group forwards to its leader.
type Routes struct {
	// Groups is the number of data groups: a client's group is
	// GroupOf(client, Groups).
	Groups int
	// Version rises whenever a group's leadership changes as this node
	// sees it: the sum of the groups' raft terms (every election and
	// leadership transfer starts a new term).
	Version uint64
	// Leaders maps a group's index to its leader's HTTP address
	// (host:port); a group without a known leader is absent.
	Leaders map[int]string
}

// Version is Routes.Version, the sum of the data groups' raft terms,
// without building the routes: a few atomic loads, for every decision
// answer.
func Version(groups []*raftgroup.Group) uint64 {
	var v uint64
	for _, g := range groups {
		v += g.Raft.CurrentTerm()
	}
	return v
}

// Routes returns this node's view of every data group's leader, by HTTP
// address (httpAddr is this node's own).
func (r *Router) Routes(groups []*raftgroup.Group, httpAddr string) Routes {
	rt := Routes{Groups: len(groups), Version: Version(groups), Leaders: map[int]string{}}
	httpOf := map[string]string{} // raft address → HTTP address
	if members, ok := r.Members(); ok {
		// Only members that proved their node id: a forged gossip member
		// must not be able to point callers at an address of its choosing.
		for _, m := range r.Proofs.Trusted(members) {
			if m.State == membership.Alive {
				httpOf[m.Meta.RaftAddr] = m.Meta.HTTPAddr
			}
		}
	}
	for _, g := range groups {
		self, addr := r.LeaderOf(g)
		switch {
		case self && httpAddr != "":
			rt.Leaders[g.Index] = httpAddr
		case httpOf[addr] != "":
			rt.Leaders[g.Index] = httpOf[addr]
		}
	}
	return rt
}
