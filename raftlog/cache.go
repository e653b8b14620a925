package raftlog

import (
	"sync"

	"github.com/hashicorp/raft"
)

// DefaultLogCacheBytes is the default size of a group's Cache.
const DefaultLogCacheBytes = 4 << 20

// logOverhead is what a cached entry costs beside its data: the raft.Log
// struct.
const logOverhead = 128

// Cache keeps a group's most recent log entries in memory, up to a number
// of bytes, in front of its LogStore: raft reads an entry back right after
// storing it (to replicate it, and on followers to apply it), and those
// reads should not touch the disk. raft's own LogCache counts entries, and
// an entry of a batch of decisions may hold megabytes, so 1,024 of them
// per group could hold gigabytes; this one holds at most its size in
// bytes, and no entry larger than that. It keeps copies of the raft.Log
// structs it is given, not the pointers: on a leader those point into the
// entries' futures, which hold the FSM's answers (an allow entry's
// decisions, several times its data), and a cache of them would keep every
// answer alive beyond its size. It is safe for concurrent use.
type Cache struct {
	store raft.LogStore
	max   int

	mu    sync.Mutex
	logs  []raft.Log // consecutive indexes, oldest first
	bytes int
	idle  bool // nothing stored since the last DropIfIdle
}

var _ raft.LogStore = (*Cache)(nil)

// NewCache returns a Cache of maxBytes (DefaultLogCacheBytes if not positive)
// in front of store.
func NewCache(store raft.LogStore, maxBytes int) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultLogCacheBytes
	}
	return &Cache{store: store, max: maxBytes}
}

func logBytes(l *raft.Log) int { return len(l.Data) + len(l.Extensions) + logOverhead }

// GetLog returns the entry at index from the cache or else from the store.
func (c *Cache) GetLog(index uint64, out *raft.Log) error {
	c.mu.Lock()
	if n := len(c.logs); n > 0 && index >= c.logs[0].Index && index <= c.logs[n-1].Index {
		*out = c.logs[index-c.logs[0].Index]
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return c.store.GetLog(index, out)
}

// StoreLog stores one entry.
func (c *Cache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries, then caches them, dropping the oldest cached
// ones beyond the size. An entry that does not follow the last cached one
// starts the cache over.
func (c *Cache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		c.clear()
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idle = false
	for _, l := range logs {
		if n := len(c.logs); n > 0 && l.Index != c.logs[n-1].Index+1 {
			c.clearLocked()
		}
		size := logBytes(l)
		if size > c.max {
			c.clearLocked()
			continue
		}
		c.logs = append(c.logs, *l)
		c.bytes += size
		for c.bytes > c.max {
			c.bytes -= logBytes(&c.logs[0])
			c.logs[0] = raft.Log{}
			c.logs = c.logs[1:]
		}
	}
	return nil
}

// DeleteRange deletes entries from the store and empties the cache.
func (c *Cache) DeleteRange(min, max uint64) error {
	c.clear()
	return c.store.DeleteRange(min, max)
}

// FirstIndex is the store's.
func (c *Cache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }

// LastIndex is the store's.
func (c *Cache) LastIndex() (uint64, error) { return c.store.LastIndex() }

// DropIfIdle empties the cache if nothing was stored since it was last
// called, and returns how many bytes it let go. Cached entries serve the
// reads that follow their store; in a group that has gone quiet those are
// done, and a follower that still needs an entry reads it from the store,
// so an idle group's memory returns to what a fresh one holds.
func (c *Cache) DropIfIdle() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.idle {
		c.idle = true
		return 0
	}
	n := c.bytes
	c.clearLocked()
	return n
}

// Bytes returns how many bytes the cache holds.
func (c *Cache) Bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

func (c *Cache) clear() {
	c.mu.Lock()
	c.clearLocked()
	c.mu.Unlock()
}

func (c *Cache) clearLocked() {
	c.logs, c.bytes = nil, 0
}
