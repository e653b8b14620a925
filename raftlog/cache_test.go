package raftlog

import (
	"bytes"
	"runtime"
	"testing"
	"weak"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func cacheEntry(index uint64, size int) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(index)}, size)}
}

// The cache holds at most its size in bytes, newest entries first kept,
// and every read is answered, from the cache or the store.
func TestCacheIsBoundedInBytes(t *testing.T) {
	store := raft.NewInmemStore()
	c := NewCache(store, 10_000)
	for i := uint64(1); i <= 100; i++ {
		require.NoError(t, c.StoreLogs([]*raft.Log{cacheEntry(i, 1_000)}))
		assert.LessOrEqual(t, c.Bytes(), 10_000, "after entry %d", i)
	}
	assert.Equal(t, 8*(1_000+logOverhead), c.Bytes(), "the newest entries that fit")
	for i := uint64(1); i <= 100; i++ {
		var l raft.Log
		require.NoError(t, c.GetLog(i, &l))
		assert.Equal(t, i, l.Index)
		assert.Equal(t, cacheEntry(i, 1_000).Data, l.Data)
	}

	// An entry larger than the cache is stored, not cached.
	require.NoError(t, c.StoreLogs([]*raft.Log{cacheEntry(101, 20_000)}))
	assert.Zero(t, c.Bytes())
	var l raft.Log
	require.NoError(t, c.GetLog(101, &l))
	assert.Len(t, l.Data, 20_000)

	// Truncation empties it; entries stored after a gap start it over.
	require.NoError(t, c.StoreLogs([]*raft.Log{cacheEntry(102, 10), cacheEntry(103, 10)}))
	require.NoError(t, c.DeleteRange(103, 103))
	assert.Zero(t, c.Bytes())
	assert.ErrorIs(t, c.GetLog(103, &l), raft.ErrLogNotFound)
	require.NoError(t, c.StoreLogs([]*raft.Log{cacheEntry(103, 10)}))
	require.NoError(t, c.GetLog(102, &l))
	assert.Equal(t, uint64(102), l.Index)
	last, err := c.LastIndex()
	require.NoError(t, err)
	assert.Equal(t, uint64(103), last)
}

// future stands for raft's logFuture: the entry raft hands the log store
// is a field of it, beside the FSM's answer.
type future struct {
	log      raft.Log
	response []byte
}

// The cache keeps the entries it is given, not what they are part of: on a
// leader raft passes pointers into the entries' futures, and the answers
// they hold must be freed once the caller has them, while the entry stays
// cached. (raft's in-memory store keeps the pointers it is given, so the
// cache stands in front of the real one.)
func TestCacheDoesNotKeepWhatEntriesArePartOf(t *testing.T) {
	db, err := OpenShared(t.TempDir(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	store, err := db.Group("g")
	require.NoError(t, err)
	c := NewCache(store, 10_000)
	f := &future{log: *cacheEntry(1, 100), response: make([]byte, 1<<20)}
	gone := weak.Make(f)
	require.NoError(t, c.StoreLogs([]*raft.Log{&f.log}))
	f = nil
	runtime.GC()
	assert.True(t, gone.Value() == nil, "the future was freed")
	var l raft.Log
	require.NoError(t, c.GetLog(1, &l))
	assert.Equal(t, cacheEntry(1, 100).Data, l.Data, "and its entry is still cached")
	assert.Equal(t, 100+logOverhead, c.Bytes())
}

// A cache that stored nothing between two calls of DropIfIdle lets its
// entries go, and they are still read from the store; one that stored
// something keeps them.
func TestCacheDropsWhenIdle(t *testing.T) {
	c := NewCache(raft.NewInmemStore(), 10_000)
	require.NoError(t, c.StoreLogs([]*raft.Log{cacheEntry(1, 100), cacheEntry(2, 100)}))
	assert.Zero(t, c.DropIfIdle(), "entries were stored since the cache was made")
	assert.Equal(t, 2*(100+logOverhead), c.Bytes())
	require.NoError(t, c.StoreLogs([]*raft.Log{cacheEntry(3, 100)}))
	assert.Zero(t, c.DropIfIdle(), "and since the last call")
	assert.Equal(t, 3*(100+logOverhead), c.DropIfIdle(), "nothing since: all of it goes")
	assert.Zero(t, c.Bytes())
	var l raft.Log
	require.NoError(t, c.GetLog(2, &l))
	assert.Equal(t, cacheEntry(2, 100).Data, l.Data, "read from the store")
	require.NoError(t, c.StoreLogs([]*raft.Log{cacheEntry(4, 100)}))
	assert.Equal(t, 100+logOverhead, c.Bytes(), "the next entry starts it over")
	assert.Zero(t, c.DropIfIdle())
}
