package raftlog

import (
	"bytes"
	"testing"

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
