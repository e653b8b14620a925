// Package datadir works on the data dir of a stopped node: Recover makes
// a lost majority's survivors the only voters of every group, Restore
// makes a new one-node cluster's data dir from a backup (package
// cluster/backup), and CheckBackup checks a backup as Restore would.
package datadir

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/raftlog"
)

// Voter names a node by its id and raft address.
type Voter struct {
	ID       string
	RaftAddr string
}

// RecoveredGroup says what Recover did to one group of a data dir.
type RecoveredGroup struct {
	ID string
	// LastIndex is the last log index this replica holds: everything up to
	// it is kept, anything a lost majority committed after it is gone.
	LastIndex uint64
	// Skipped is set for a group this node holds no replica of.
	Skipped bool
}

// Recover rewrites the data dir of a stopped node so that every group it
// holds a replica of has exactly voters as its voters: the way out when a
// majority of some group's replicas is gone for good (Consul's peers.json,
// etcd's --force-new-cluster). Raft cannot do this on its own, because it
// needs that lost majority to change a configuration.
//
// Run it on every node named in voters, with the same voters, while every
// node is stopped, then start those nodes (others join later with empty
// data dirs). Each group keeps what the recovered replicas hold: decisions
// a lost majority committed that no survivor received are lost, which is
// why this is a last resort and never automatic. The node's own id must be
// among voters.
//
// Each group's log is replayed into a state machine to snapshot it, which
// takes a while for a long log: if started is set, Recover calls it as it
// begins each group it holds, with the last index it will keep.
func Recover(dataDir string, voters []Voter, logger *slog.Logger, started func(RecoveredGroup)) ([]RecoveredGroup, error) {
	if logger == nil {
		logger = slog.Default()
	}
	cf, err := readClusterFile(dataDir)
	if err != nil {
		return nil, err
	}
	conf, err := recoveryConfiguration(cf.NodeID, voters)
	if err != nil {
		return nil, err
	}
	stores, err := raftgroup.OpenLogStores(dataDir, cf.LogStore, raftlog.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	defer stores.Close()
	var out []RecoveredGroup
	for _, id := range raftgroup.IDs(cf.Groups) {
		dir := raftgroup.Dir(id)
		g, err := recoverGroup(stores, id, filepath.Join(dataDir, "groups", dir), cf.NodeID, conf, logger, started)
		if err != nil {
			return out, fmt.Errorf("cluster: recover group %s: %w", id, err)
		}
		out = append(out, g)
	}
	return out, nil
}

func recoveryConfiguration(self string, voters []Voter) (raft.Configuration, error) {
	var conf raft.Configuration
	for _, v := range voters {
		if v.ID == "" || v.RaftAddr == "" {
			return conf, fmt.Errorf("cluster: recover: voter %q at %q: both an id and a raft address are needed", v.ID, v.RaftAddr)
		}
		if slices.ContainsFunc(conf.Servers, func(s raft.Server) bool { return string(s.ID) == v.ID }) {
			return conf, fmt.Errorf("cluster: recover: voter %q named twice", v.ID)
		}
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(v.ID), Address: raft.ServerAddress(v.RaftAddr)})
	}
	if !slices.ContainsFunc(conf.Servers, func(s raft.Server) bool { return string(s.ID) == self }) {
		return conf, fmt.Errorf("cluster: recover: this data dir belongs to node %q, which is not among the voters", self)
	}
	return conf, nil
}

func recoverGroup(stores *raftgroup.LogStores, id, dir, nodeID string, conf raft.Configuration, logger *slog.Logger, started func(RecoveredGroup)) (RecoveredGroup, error) {
	rg := RecoveredGroup{ID: id}
	store, err := stores.Open(id, dir)
	if err != nil {
		return rg, err
	}
	defer store.Close()
	hl := raftgroup.NewHCLogger(logger, "raft", slog.LevelWarn)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hl)
	if err != nil {
		return rg, err
	}
	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return rg, err
	}
	if !has {
		rg.Skipped = true
		return rg, nil
	}
	if rg.LastIndex, err = store.LastIndex(); err != nil {
		return rg, err
	}
	if started != nil {
		started(rg)
	}
	// Recovery replays the log into a state machine to snapshot it, so the
	// recovered group starts from a snapshot holding everything applied.
	f, err := fsm.New(fsm.Options{})
	if err != nil {
		return rg, err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(nodeID)
	rc.Logger = hl
	_, trans := raft.NewInmemTransport("")
	if err := raft.RecoverCluster(rc, f, store, store, snaps, trans, conf); err != nil {
		return rg, err
	}
	return rg, nil
}

// readClusterFile reads a data dir's quorate.json without creating it, and
// checks it as a starting node would.
func readClusterFile(dataDir string) (raftgroup.ClusterFile, error) {
	data, err := os.ReadFile(filepath.Join(dataDir, "quorate.json"))
	if err != nil {
		return raftgroup.ClusterFile{}, fmt.Errorf("cluster: %s is not a node's data dir: %w", dataDir, err)
	}
	var cf raftgroup.ClusterFile
	if err := json.Unmarshal(data, &cf); err != nil {
		return raftgroup.ClusterFile{}, fmt.Errorf("cluster: %s/quorate.json: %w", dataDir, err)
	}
	return raftgroup.CheckClusterFile(dataDir, cf.NodeID, 0, "")
}
