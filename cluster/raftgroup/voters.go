package raftgroup

import (
	"slices"

	"github.com/hashicorp/raft"
)

// VoterIDs returns the voters of a raft configuration, sorted.
func VoterIDs(c raft.Configuration) []string {
	var ids []string
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			ids = append(ids, string(s.ID))
		}
	}
	slices.Sort(ids)
	return ids
}

// IsVoter reports whether node id is a voter of g as its raft
// configuration stands (false if it cannot be read).
func (g *Group) IsVoter(id string) bool {
	f := g.Raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id && s.Suffrage == raft.Voter {
			return true
		}
	}
	return false
}

// Alone reports whether node self is the only server of every group's raft
// configuration (a one-node cluster), so that no other clock ever stamps
// their entries.
func Alone(groups []*Group, self string) bool {
	for _, g := range groups {
		f := g.Raft.GetConfiguration()
		if f.Error() != nil {
			return false
		}
		servers := f.Configuration().Servers
		if len(servers) != 1 || servers[0].ID != raft.ServerID(self) {
			return false
		}
	}
	return true
}
