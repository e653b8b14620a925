// Package raftlog stores the raft logs and stable state (term, vote) of the
// groups a node hosts, behind hashicorp/raft's LogStore and StableStore.
//
// Two layouts exist, chosen when a data dir is created:
//
//   - Shared: one pebble database per node holds every group's log. Groups
//     write through one write-ahead log, so StoreLogs calls of many groups
//     that arrive together share one write and one fsync (pebble's commit
//     pipeline coalesces concurrent synced commits). Truncation after a
//     snapshot is a range tombstone: its cost does not grow with the log.
//   - Bolt: one raft-boltdb/v2 file per group, every commit synced on its own.
//
// Either way a write returns only once it is durable, and every Store
// survives being closed while raft's transport goroutines still call it
// (see Store).
package raftlog
