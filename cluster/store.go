package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// guardedStore is a group's raft-boltdb log and stable store, made safe to
// close while raft's network transport may still be handling a heartbeat.
// hashicorp/raft answers heartbeats on the transport's own goroutines, which
// Raft.Shutdown does not wait for, and panics if the stable store fails a
// write. So close waits for operations in progress, and an operation that
// arrives after close blocks forever rather than fail: it belongs to a raft
// instance that has already shut down, and the process is going away or
// reopening the store under a new instance.
type guardedStore struct {
	bolt   *raftboltdb.BoltStore
	mu     sync.RWMutex
	closed bool
}

var (
	_ raft.LogStore    = (*guardedStore)(nil)
	_ raft.StableStore = (*guardedStore)(nil)
)

// enter must be paired with s.mu.RUnlock.
func (s *guardedStore) enter() {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		select {} // see the type's comment
	}
}

func (s *guardedStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.bolt.Close()
}

func (s *guardedStore) FirstIndex() (uint64, error) {
	s.enter()
	defer s.mu.RUnlock()
	return s.bolt.FirstIndex()
}

func (s *guardedStore) LastIndex() (uint64, error) {
	s.enter()
	defer s.mu.RUnlock()
	return s.bolt.LastIndex()
}

func (s *guardedStore) GetLog(index uint64, log *raft.Log) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.bolt.GetLog(index, log)
}

func (s *guardedStore) StoreLog(log *raft.Log) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.bolt.StoreLog(log)
}

func (s *guardedStore) StoreLogs(logs []*raft.Log) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.bolt.StoreLogs(logs)
}

func (s *guardedStore) DeleteRange(min, max uint64) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.bolt.DeleteRange(min, max)
}

func (s *guardedStore) Set(key, val []byte) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.bolt.Set(key, val)
}

func (s *guardedStore) Get(key []byte) ([]byte, error) {
	s.enter()
	defer s.mu.RUnlock()
	return s.bolt.Get(key)
}

func (s *guardedStore) SetUint64(key []byte, val uint64) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.bolt.SetUint64(key, val)
}

func (s *guardedStore) GetUint64(key []byte) (uint64, error) {
	s.enter()
	defer s.mu.RUnlock()
	return s.bolt.GetUint64(key)
}
