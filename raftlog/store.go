package raftlog

import (
	"errors"
	"sync"

	"github.com/hashicorp/raft"
)

// ErrKeyNotFound is what Get and GetUint64 return for a key never set.
// hashicorp/raft recognises it by its text, "not found", so the text is
// part of the contract.
var ErrKeyNotFound = errors.New("not found")

// backend is one group's storage in one of the layouts.
type backend interface {
	raft.LogStore
	raft.StableStore
	close() error
}

// Store is one group's raft log and stable store, in either layout. It is
// safe for concurrent use and safe to close while raft's network transport
// may still call it: hashicorp/raft answers heartbeats on the transport's
// own goroutines, which Raft.Shutdown does not wait for, and panics if the
// stable store fails a write. So Close waits for calls in progress, and a
// call that arrives after Close blocks forever rather than fail: it belongs
// to a raft instance that has already shut down, and the process is going
// away or reopening the store under a new instance.
type Store struct {
	b      backend
	mu     sync.RWMutex
	closed bool
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// enter must be paired with s.mu.RUnlock.
func (s *Store) enter() {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		select {} // see the type's comment
	}
}

// Close closes the group's storage (for the shared layout, the group's view
// of the database; the database stays open for the other groups).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.b.close()
}

// FirstIndex implements raft.LogStore: the first index stored, 0 if none.
func (s *Store) FirstIndex() (uint64, error) {
	s.enter()
	defer s.mu.RUnlock()
	return s.b.FirstIndex()
}

// LastIndex implements raft.LogStore: the last index stored, 0 if none.
func (s *Store) LastIndex() (uint64, error) {
	s.enter()
	defer s.mu.RUnlock()
	return s.b.LastIndex()
}

// GetLog implements raft.LogStore; raft.ErrLogNotFound if index is absent.
func (s *Store) GetLog(index uint64, log *raft.Log) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.b.GetLog(index, log)
}

// StoreLog implements raft.LogStore; it returns once the entry is durable.
func (s *Store) StoreLog(log *raft.Log) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.b.StoreLog(log)
}

// StoreLogs implements raft.LogStore; it returns once every entry is durable.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.b.StoreLogs(logs)
}

// DeleteRange implements raft.LogStore: it removes indexes min..max, inclusive.
func (s *Store) DeleteRange(min, max uint64) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.b.DeleteRange(min, max)
}

// Set implements raft.StableStore; it returns once the value is durable.
func (s *Store) Set(key, val []byte) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.b.Set(key, val)
}

// Get implements raft.StableStore; ErrKeyNotFound if key was never set.
func (s *Store) Get(key []byte) ([]byte, error) {
	s.enter()
	defer s.mu.RUnlock()
	return s.b.Get(key)
}

// SetUint64 implements raft.StableStore; it returns once the value is durable.
func (s *Store) SetUint64(key []byte, val uint64) error {
	s.enter()
	defer s.mu.RUnlock()
	return s.b.SetUint64(key, val)
}

// GetUint64 implements raft.StableStore; ErrKeyNotFound if key was never set.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	s.enter()
	defer s.mu.RUnlock()
	return s.b.GetUint64(key)
}
