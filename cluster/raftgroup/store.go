package raftgroup

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/quorate/quorate/raftlog"
)

// DefaultGroups is the number of data groups of a new data dir whose node
// was not told another (cluster.Options.Groups).
const DefaultGroups = 8

// Log store layouts (cluster.Options.LogStore).
const (
	// LogStoreShared keeps every group's raft log in one pebble database per
	// node, so groups share write-ahead-log fsyncs (the default).
	LogStoreShared = "shared"
	// LogStoreBoltDB keeps each group's raft log in its own raft-boltdb/v2
	// file, every commit synced on its own (the layout of data dirs created
	// before the shared store existed).
	LogStoreBoltDB = "boltdb"
)

// LogStores opens the raft log and stable store of each group in the layout
// the data dir was created with.
type LogStores struct {
	layout  string
	dataDir string
	shared  *raftlog.DB // LogStoreShared
	bolt    raftlog.Bolt
}

// OpenLogStores opens the stores of a data dir created with layout; o
// applies to the shared database only.
func OpenLogStores(dataDir, layout string, o raftlog.Options) (*LogStores, error) {
	s := &LogStores{layout: layout, dataDir: dataDir}
	if layout == LogStoreShared {
		db, err := raftlog.OpenShared(filepath.Join(dataDir, "log"), o)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		s.shared = db
	}
	return s, nil
}

// Open opens the store of group id, whose snapshots live in dir.
func (s *LogStores) Open(id, dir string) (*raftlog.Store, error) {
	if s.shared != nil {
		return s.shared.Group(id)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return s.bolt.Open(filepath.Join(dir, "raft.db"))
}

// Syncs counts the log's durable commits since the node started: pebble
// WAL fsyncs (each may carry many groups' entries), or bolt write
// transactions.
func (s *LogStores) Syncs() uint64 {
	if s.shared != nil {
		return s.shared.Syncs()
	}
	return s.bolt.Syncs()
}

// Close closes the shared database, if any, after the groups' stores.
func (s *LogStores) Close() error {
	if s.shared != nil {
		return s.shared.Close()
	}
	return nil
}

// HasState reports whether a group's store holds raft state: a log entry
// or a term.
func HasState(st *raftlog.Store) (bool, error) {
	last, err := st.LastIndex()
	if err != nil || last > 0 {
		return last > 0, err
	}
	_, err = st.GetUint64([]byte("CurrentTerm"))
	if errors.Is(err, raftlog.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ClusterFile records facts fixed when the node's data dir was created.
type ClusterFile struct {
	NodeID string `json:"node_id"`
	Groups int    `json:"groups"`
	// LogStore is the log layout; data dirs from before it was recorded
	// hold raft-boltdb files.
	LogStore string `json:"log_store,omitempty"`
}

// CheckClusterFile creates the data dir's quorate.json, or checks the
// node's id, group count and log layout against it, and returns the facts
// to run with: the group count and log layout given, or where those are
// zero, the recorded ones (DefaultGroups and LogStoreShared for a new data
// dir).
func CheckClusterFile(dataDir, nodeID string, groups int, logStore string) (ClusterFile, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return ClusterFile{}, err
	}
	path := filepath.Join(dataDir, "quorate.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if state, err := anyLogState(dataDir); err != nil || state {
			if err == nil {
				err = fmt.Errorf("cluster: data dir %s holds raft state but no quorate.json: restore the file rather than start over", dataDir)
			}
			return ClusterFile{}, err
		}
		cf := ClusterFile{NodeID: nodeID, Groups: groups, LogStore: cmp.Or(logStore, LogStoreShared)}
		if cf.Groups == 0 {
			cf.Groups = DefaultGroups
		}
		return cf, writeFileAtomic(path, cf)
	}
	if err != nil {
		return ClusterFile{}, err
	}
	var cf ClusterFile
	if err := json.Unmarshal(data, &cf); err != nil {
		return ClusterFile{}, fmt.Errorf("cluster: %s: %w", path, err)
	}
	recorded := cmp.Or(cf.LogStore, LogStoreBoltDB)
	switch {
	case cf.Groups < 1 || cf.Groups > 1024:
		return ClusterFile{}, fmt.Errorf("cluster: %s records %d groups, not 1..1024", path, cf.Groups)
	case groups != 0 && cf.Groups != groups:
		return ClusterFile{}, fmt.Errorf("cluster: data dir %s was created with %d groups, not %d: the group count is fixed when a cluster is created", dataDir, cf.Groups, groups)
	case cf.NodeID != nodeID:
		return ClusterFile{}, fmt.Errorf("cluster: data dir %s belongs to node %q, not %q", dataDir, cf.NodeID, nodeID)
	case logStore != "" && logStore != recorded:
		return ClusterFile{}, fmt.Errorf("cluster: data dir %s was created with log store %q, not %q: start with --log-store %s (the layout is fixed when a data dir is created)", dataDir, recorded, logStore, recorded)
	}
	cf.LogStore = recorded
	return cf, checkGroupDirs(dataDir, cf.Groups)
}

// checkGroupDirs checks quorate.json's group count against the groups the
// data dir holds state of: a count lowered by hand would hash clients to
// groups that hold none of their state.
func checkGroupDirs(dataDir string, groups int) error {
	entries, err := os.ReadDir(filepath.Join(dataDir, "groups"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		var i int
		if _, err := fmt.Sscanf(e.Name(), "g%03d", &i); err == nil && e.IsDir() && i >= groups {
			return fmt.Errorf("cluster: data dir %s holds group %d, but its quorate.json records %d groups: the file does not describe this data dir", dataDir, i, groups)
		}
	}
	return nil
}

// anyLogState reports whether dir holds a raft log of either layout.
func anyLogState(dir string) (bool, error) {
	for _, p := range []string{filepath.Join(dir, "log"), filepath.Join(dir, "groups", MetaGroupID, "raft.db")} {
		if ok, err := exists(p); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// writeFileAtomic writes v as indented JSON to path through a synced
// temporary file and a rename, so a crash leaves the old file or the new
// one, never a torn one.
func writeFileAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".quorate-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// PrivateDataDir makes dataDir readable by its owner only (0700): the log
// holds every client id and request id. It returns the mode the directory
// had when that was wider, so the caller can say so (0: it was private).
func PrivateDataDir(dataDir string) (was os.FileMode, err error) {
	fi, err := os.Stat(dataDir)
	if err != nil {
		return 0, err
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return 0, nil
	}
	return fi.Mode().Perm(), os.Chmod(dataDir, 0o700)
}

// Dir is the directory, under a data dir's "groups", that holds group id's
// snapshots (and its bolt file in that layout): "meta", or g000.. for the
// data groups.
func Dir(id string) string {
	if id == MetaGroupID {
		return MetaGroupID
	}
	i, err := strconv.Atoi(id)
	if err != nil {
		return id
	}
	return fmt.Sprintf("g%03d", i)
}

// IDs are the ids of a node's groups with groups data groups: "meta"
// first, then "0".."groups-1".
func IDs(groups int) []string {
	ids := []string{MetaGroupID}
	for i := range groups {
		ids = append(ids, strconv.Itoa(i))
	}
	return ids
}

// IsNewDataDir reports whether dir is absent or empty: a node that starts
// there creates the cluster file and every store itself.
func IsNewDataDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	return errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0)
}

// ClearDataDir removes everything in dir, leaving dir: for a node that
// created it and must start it over (a new node that learned its cluster's
// group count).
func ClearDataDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
