package fsm

import (
	"bufio"
	"io"
)

// SnapshotInfo describes a snapshot's bytes, checked as Restore checks
// them.
type SnapshotInfo struct {
	// Format is the snapshot's format version (1..4).
	Format byte
	// Applied is the index of the last raft entry the state includes.
	Applied uint64
	// HighWater is the group's time.
	HighWater      int64
	ClusterVersion uint32
	ConfigVersion  uint64
	// Clients counts buckets and sliding windows; Assignments, tier
	// assignments; RequestIDs, decisions remembered by request id.
	Clients     int
	Assignments int
	RequestIDs  int
}

// CheckSnapshot decodes and validates data exactly as Restore would,
// without touching any FSM: a backup is checked with it before anything
// is written.
func CheckSnapshot(data []byte) (SnapshotInfo, error) {
	s, err := decodeSnapshot(data)
	if err != nil {
		return SnapshotInfo{}, err
	}
	return SnapshotInfo{
		Format:         data[len(snapshotMagic)],
		Applied:        s.applied,
		HighWater:      s.highWater,
		ClusterVersion: s.clusterVersion,
		ConfigVersion:  s.config.Version,
		Clients:        len(s.buckets[0]) + len(s.windowMap()),
		Assignments:    s.tiers.len(),
		RequestIDs:     s.idCount(),
	}, nil
}

// WriteSnapshot writes a snapshot of the current state to w, the bytes
// Persist would write. Like Snapshot it holds the FSM's lock only for a
// constant time, so applies go on while it writes.
func (f *FSM) WriteSnapshot(w io.Writer) error {
	snap, _ := f.Snapshot()
	defer snap.Release()
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := snap.(*snapshot).writeTo(bw); err != nil {
		return err
	}
	return bw.Flush()
}
