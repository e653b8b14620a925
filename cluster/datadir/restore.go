package datadir

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/cluster/backup"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/raftlog"
)

// RestoreOptions says where a backup is restored to.
type RestoreOptions struct {
	// DataDir is the data dir to create; it must not exist, or be empty.
	DataDir string
	// NodeID and RaftAddr are the id and raft address of the node that
	// will start from DataDir: the only voter of every group.
	NodeID   string
	RaftAddr string
	// LogStore is the log layout (raftgroup.LogStoreShared if empty).
	LogStore string
	Logger   *slog.Logger
}

// RestoredGroup describes one group of a backup.
type RestoredGroup struct {
	ID   string
	Info fsm.SnapshotInfo
	// Bytes is the size of the group's snapshot; Digest, the first 16 hex
	// digits of its SHA-256: two backups of a group with equal digests hold
	// the same state.
	Bytes  int
	Digest string
	sum    [sha256.Size]byte // of the snapshot, to find it unchanged when written
}

// Restore makes opts.DataDir from the backup at path: a data dir from
// which `quorate serve` starts a one-node cluster (opts.NodeID at
// opts.RaftAddr, the only voter of every group) holding every group's
// state as the backup has it; other nodes then join as usual.
//
// The whole file is read and every group's snapshot checked as a node
// would check it before anything is written; the data dir is then built
// beside its final path and renamed into place only once complete, so a
// damaged or truncated backup, or a failure half-way, leaves nothing.
func Restore(path string, opts RestoreOptions) (backup.Header, []RestoredGroup, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	switch {
	case opts.DataDir == "" || opts.NodeID == "" || opts.RaftAddr == "":
		return backup.Header{}, nil, errors.New("cluster: restore: a data dir, a node id and a raft address are needed")
	case opts.LogStore != "" && opts.LogStore != raftgroup.LogStoreShared && opts.LogStore != raftgroup.LogStoreBoltDB:
		return backup.Header{}, nil, fmt.Errorf("cluster: restore: log store %q: %q or %q", opts.LogStore, raftgroup.LogStoreShared, raftgroup.LogStoreBoltDB)
	}
	if err := emptyOrAbsent(opts.DataDir); err != nil {
		return backup.Header{}, nil, err
	}
	h, groups, err := CheckBackup(path)
	if err != nil {
		return h, nil, err
	}
	parent := filepath.Dir(filepath.Clean(opts.DataDir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return h, nil, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(opts.DataDir)+".restoring-")
	if err != nil {
		return h, nil, err
	}
	defer os.RemoveAll(tmp) // harmless once renamed
	if err := writeDataDir(path, tmp, h, groups, opts); err != nil {
		return h, nil, fmt.Errorf("cluster: restore: %w", err)
	}
	if err := os.Chmod(tmp, 0o700); err != nil {
		return h, nil, err
	}
	if err := os.Remove(opts.DataDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return h, nil, err
	}
	if err := os.Rename(tmp, opts.DataDir); err != nil {
		return h, nil, err
	}
	return h, groups, syncDir(parent)
}

// CheckBackup reads the whole backup at path and checks every group's
// snapshot as Restore does, writing nothing.
func CheckBackup(path string) (backup.Header, []RestoredGroup, error) {
	f, err := os.Open(path)
	if err != nil {
		return backup.Header{}, nil, err
	}
	defer f.Close()
	var groups []RestoredGroup
	h, err := backup.Read(f, func(h backup.Header, s backup.Section) error {
		info, err := fsm.CheckSnapshot(s.Data)
		if err != nil {
			return fmt.Errorf("%w: group %s: %w", backup.ErrDamaged, s.Group, err)
		}
		sum := sha256.Sum256(s.Data)
		groups = append(groups, RestoredGroup{ID: s.Group, Info: info, Bytes: len(s.Data), Digest: hex.EncodeToString(sum[:8]), sum: sum})
		return nil
	})
	if err != nil {
		return h, nil, fmt.Errorf("cluster: restore from %s: %w", path, err)
	}
	if h.ClusterVersion > fsm.MaxClusterVersion {
		return h, nil, fmt.Errorf("cluster: restore from %s: taken at cluster version %d; this binary runs up to %d", path, h.ClusterVersion, fsm.MaxClusterVersion)
	}
	return h, groups, nil
}

// writeDataDir writes the data dir of a one-node cluster holding the
// backup at path, as CheckBackup found it (groups), into dir. The backup
// is read again, and each group must hold the very bytes CheckBackup
// checked: the file might have changed since.
func writeDataDir(path, dir string, h backup.Header, groups []RestoredGroup, opts RestoreOptions) error {
	cf, err := raftgroup.CheckClusterFile(dir, opts.NodeID, h.Groups, opts.LogStore)
	if err != nil {
		return err
	}
	stores, err := raftgroup.OpenLogStores(dir, cf.LogStore, raftlog.Options{Logger: opts.Logger})
	if err != nil {
		return err
	}
	conf := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(opts.NodeID), Address: raft.ServerAddress(opts.RaftAddr),
	}}}
	_, trans := raft.NewInmemTransport("")
	hl := raftgroup.NewHCLogger(opts.Logger, "raft", slog.LevelWarn)
	f, err := os.Open(path)
	if err != nil {
		stores.Close()
		return err
	}
	defer f.Close()
	next := 0
	_, err = backup.Read(f, func(_ backup.Header, s backup.Section) error {
		if next >= len(groups) || groups[next].ID != s.Group || sha256.Sum256(s.Data) != groups[next].sum {
			return fmt.Errorf("%w: group %s changed since it was checked", backup.ErrDamaged, s.Group)
		}
		info := groups[next].Info
		next++
		gdir := filepath.Join(dir, "groups", raftgroup.Dir(s.Group))
		store, err := stores.Open(s.Group, gdir)
		if err != nil {
			return err
		}
		defer store.Close()
		// The group starts at term 1 with a snapshot at the index its
		// state was taken at, holding this node as its only voter.
		if err := store.SetUint64([]byte("CurrentTerm"), 1); err != nil {
			return err
		}
		snaps, err := raft.NewFileSnapshotStoreWithLogger(gdir, 2, hl)
		if err != nil {
			return err
		}
		index := max(info.Applied, 1)
		sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, conf, index, trans)
		if err != nil {
			return err
		}
		if _, err := sink.Write(s.Data); err != nil {
			_ = sink.Cancel()
			return err
		}
		return sink.Close()
	})
	if cerr := stores.Close(); err == nil {
		err = cerr
	}
	return err
}

// emptyOrAbsent refuses a data dir that holds anything.
func emptyOrAbsent(dir string) error {
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := d.Readdirnames(1); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("cluster: restore: %s is not empty: a backup is restored into a new data dir", dir)
		}
		return err
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
