package raftgroup

import (
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/raftlog"
)

// Stores is every group's raft store of a node, opened before any group
// (OpenStores), so that the node knows whether it holds state in any of
// them: a node that does is a member restarting (with more nodes than
// replicas, some hold no meta replica), never a new cluster to bootstrap.
type Stores struct {
	dataDir string
	stores  map[string]*raftlog.Store // of groups not opened yet
	// Existing is whether any group's store holds state.
	Existing bool
}

// OpenStores opens, on logs, the store of the meta group and of each of
// groups data groups of the data dir dataDir.
func OpenStores(logs *LogStores, dataDir string, groups int) (*Stores, error) {
	s := &Stores{dataDir: dataDir, stores: map[string]*raftlog.Store{}}
	for _, id := range IDs(groups) {
		st, err := logs.Open(id, s.dir(id))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.stores[id] = st
		has, err := HasState(st)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Existing = s.Existing || has
	}
	return s, nil
}

// dir is group id's directory under the data dir.
func (s *Stores) dir(id string) string { return filepath.Join(s.dataDir, "groups", Dir(id)) }

// Open opens group c.ID (Open) on its store, with its transport from trans
// and its directory under the data dir (c.Store, c.Trans and c.Dir are
// filled in). The group owns the store from then on, opened or not.
func (s *Stores) Open(c Config, trans func(id string) (raft.Transport, error)) (*Group, error) {
	store := s.stores[c.ID]
	delete(s.stores, c.ID) // the group owns it from here
	t, err := trans(c.ID)
	if err != nil {
		store.Close()
		return nil, err
	}
	c.Store, c.Trans, c.Dir = store, t, s.dir(c.ID)
	return Open(c)
}

// Close closes the stores of the groups not opened (after a failure).
func (s *Stores) Close() {
	for _, st := range s.stores {
		_ = st.Close()
	}
	s.stores = nil
}
