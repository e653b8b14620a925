package raftlog

import (
	"errors"
	"sync/atomic"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Bolt opens the one-file-per-group layout: each group's log and stable
// store in its own raft-boltdb/v2 file, each write its own synced bolt
// transaction. The zero value is ready to use.
type Bolt struct {
	commits atomic.Uint64
}

// Open opens (or creates) the bolt file at path.
func (b *Bolt) Open(path string) (*Store, error) {
	db, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		return nil, err
	}
	return &Store{b: &boltLog{BoltStore: db, commits: &b.commits}}, nil
}

// Syncs counts the synced write transactions of every file opened by b (a
// bolt commit is two fdatasyncs: pages, then the meta page).
func (b *Bolt) Syncs() uint64 { return b.commits.Load() }

// boltLog counts the write transactions of a raft-boltdb store.
type boltLog struct {
	*raftboltdb.BoltStore
	commits *atomic.Uint64
}

func (l *boltLog) close() error { return l.Close() }

func (l *boltLog) StoreLog(log *raft.Log) error {
	l.commits.Add(1)
	return l.BoltStore.StoreLog(log)
}

func (l *boltLog) StoreLogs(logs []*raft.Log) error {
	l.commits.Add(1)
	return l.BoltStore.StoreLogs(logs)
}

func (l *boltLog) DeleteRange(min, max uint64) error {
	l.commits.Add(1)
	return l.BoltStore.DeleteRange(min, max)
}

func (l *boltLog) Set(k, v []byte) error {
	l.commits.Add(1)
	return l.BoltStore.Set(k, v)
}

func (l *boltLog) SetUint64(k []byte, v uint64) error {
	l.commits.Add(1)
	return l.BoltStore.SetUint64(k, v)
}

// Get maps raft-boltdb's not-found error to ours (same text).
func (l *boltLog) Get(k []byte) ([]byte, error) {
	v, err := l.BoltStore.Get(k)
	if errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return nil, ErrKeyNotFound
	}
	return v, err
}

func (l *boltLog) GetUint64(k []byte) (uint64, error) {
	v, err := l.BoltStore.GetUint64(k)
	if errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return 0, ErrKeyNotFound
	}
	return v, err
}
