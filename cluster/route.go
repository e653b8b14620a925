package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/raftgroup"
)

// errNotLeader means the request reached a node that does not serve the
// group: nothing was appended, so it is safe to retry at the leader (see
// errs.ErrNotLeader).
var errNotLeader = errs.ErrNotLeader

// leaderOf returns where group g is served: self, or the raft address of
// another node ("" if no leader is known). Raft's own view wins; a node
// that is not a voter of g learns the leader from gossip.
func (n *Node) leaderOf(g *raftgroup.Group) (self bool, addr string) {
	if g.Serving() {
		return true, ""
	}
	if a, id := g.Raft.LeaderWithID(); id != "" && string(id) != n.opts.NodeID {
		return false, string(a)
	}
	if n.members == nil {
		return false, ""
	}
	for _, mb := range n.members.Snapshot() {
		if mb.State == membership.Alive && g.Index < len(mb.Leads) && mb.Leads[g.Index] && n.proofs.Trusts(mb.Meta.ID, mb.Meta.RaftAddr) {
			return false, mb.Meta.RaftAddr
		}
	}
	return false, ""
}

// atLeader runs local if this node serves g, or remote with the leader's
// address otherwise, retrying while the answer is errNotLeader (nothing was
// appended) until ctx is done. With no leader known it waits for one, unless
// this node is cut off from a majority of g's voters (reach.Judge.CutOff): then no
// leader it can reach is coming, and it answers ErrUnavailable at once
// (nothing was decided) so that the caller tries another node. It neither
// proposes as a leader whose lease has lapsed nor forwards to a leader it
// has not heard from for a heartbeat timeout: both would most likely hold
// the request until the deadline and end ambiguous.
func (n *Node) atLeader(ctx context.Context, g *raftgroup.Group, local func() error, remote func(addr string) error) error {
	backoff := 5 * time.Millisecond
	for {
		self, addr := n.leaderOf(g)
		var err error
		switch {
		case self && n.reach.LeaseLapsed(g):
			err = fmt.Errorf("%w: group %s: leads, but has not heard from a majority within the lease", errNotLeader, g.ID)
		case self:
			err = local()
		case addr != "" && n.reach.LeaderSilent(g, addr):
			err = fmt.Errorf("%w: group %s: its leader %s has been silent for a heartbeat timeout", errNotLeader, g.ID, addr)
		case addr != "":
			err = remote(addr)
		default:
			err = fmt.Errorf("%w: group %s has no leader", errNotLeader, g.ID)
		}
		if err == nil || !errors.Is(err, errNotLeader) {
			return err
		}
		if cut := n.reach.CutOff(g); cut != nil {
			return fmt.Errorf("%w (last: %v)", cut, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: group %s: %w (last: %v)", ErrUnavailable, g.ID, ctx.Err(), err)
		case <-n.stop:
			return ErrShuttingDown
		case <-g.LeadershipChanged():
		case <-time.After(backoff):
			backoff = min(2*backoff, 100*time.Millisecond)
		}
	}
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

// RoutesVersion is Routes().Version, the sum of the data groups' raft
// terms, without building the routes: a few atomic loads, for every
// decision answer.
func (n *Node) RoutesVersion() uint64 {
	var v uint64
	for _, g := range n.groups {
		v += g.Raft.CurrentTerm()
	}
	return v
}

// Routes returns this node's view of every data group's leader.
func (n *Node) Routes() Routes {
	rt := Routes{Groups: len(n.groups), Version: n.RoutesVersion(), Leaders: map[int]string{}}
	httpOf := map[string]string{} // raft address → HTTP address
	if n.members != nil {
		// Only members that proved their node id: a forged gossip member
		// must not be able to point callers at an address of its choosing.
		for _, m := range n.trustedMembers() {
			if m.State == membership.Alive {
				httpOf[m.Meta.RaftAddr] = m.Meta.HTTPAddr
			}
		}
	}
	for _, g := range n.groups {
		self, addr := n.leaderOf(g)
		switch {
		case self && n.opts.HTTPAddr != "":
			rt.Leaders[g.Index] = n.opts.HTTPAddr
		case httpOf[addr] != "":
			rt.Leaders[g.Index] = httpOf[addr]
		}
	}
	return rt
}
