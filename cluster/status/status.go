// Package status describes a node's view of its cluster: every group as
// this node's replica sees it (Group, as /internal/groups and the metrics
// read it) and the whole of GET /v1/cluster (Cluster).
package status

import (
	"fmt"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
)

// Cluster is the node's view of the cluster: self first, then every member
// trusted returns, and every group of groups (the meta group first) as this
// node's replica sees it, a group whose replica knows no leader named by
// leaderOf's address, as the member there.
func Cluster(self api.NodeStatus, clusterVersion uint32, trusted func() map[string]membership.Member,
	groups []*raftgroup.Group, leaderOf func(*raftgroup.Group) (bool, string)) api.ClusterStatus {
	st := api.ClusterStatus{NodeID: self.ID, ClusterVersion: clusterVersion}
	st.Nodes = []api.NodeStatus{self}
	ms := trusted()
	for _, id := range membership.SortedIDs(ms, "") {
		m := ms[id]
		state := string(m.State)
		if m.Meta.Leaving && m.State == membership.Alive {
			state = string(membership.Leaving)
		}
		st.Nodes = append(st.Nodes, api.NodeStatus{ID: id, RaftAddr: m.Meta.RaftAddr, HTTPAddr: m.Meta.HTTPAddr, State: state,
			Version: m.Meta.Version, MaxClusterVersion: max(m.Meta.MaxClusterVersion, fsm.BaseClusterVersion)})
	}
	for _, gs := range Groups(groups) {
		st.Groups = append(st.Groups, api.GroupStatus(gs))
	}
	for i, g := range groups {
		if st.Groups[i].Leader == "" {
			if _, addr := leaderOf(g); addr != "" {
				st.Groups[i].Leader = nodeAt(trusted(), addr)
			}
		}
	}
	return st
}

// nodeAt returns the id of the member whose raft address is addr.
func nodeAt(members map[string]membership.Member, addr string) string {
	for id, m := range members {
		if m.Meta.RaftAddr == addr {
			return id
		}
	}
	return addr
}

// Groups is every group of groups as this node's replica sees it.
func Groups(groups []*raftgroup.Group) []peerrpc.WireGroupStatus {
	var out []peerrpc.WireGroupStatus
	for _, g := range groups {
		out = append(out, Group(g))
	}
	return out
}

// Group is g as this node's replica sees it.
func Group(g *raftgroup.Group) peerrpc.WireGroupStatus {
	_, leader := g.Raft.LeaderWithID()
	gs := peerrpc.WireGroupStatus{
		ID:            g.ID,
		State:         g.Raft.State().String(),
		Leader:        string(leader),
		AppliedIndex:  g.Raft.AppliedIndex(),
		CommitIndex:   g.Raft.CommitIndex(),
		ConfigVersion: g.FSM.Config().Version,
	}
	stats := g.Raft.Stats()
	fmt.Sscan(stats["term"], &gs.Term)
	if g.Raft.State() != raft.Leader {
		gs.LastContact = g.Raft.LastContact()
	}
	if f := g.Raft.GetConfiguration(); f.Error() == nil {
		gs.Voters = raftgroup.VoterIDs(f.Configuration())
	}
	slices.Sort(gs.Voters)
	return gs
}
