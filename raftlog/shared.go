package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Options configure a shared database. The zero value is usable.
type Options struct {
	// Logger receives pebble's messages: information at debug level, errors
	// at error level (slog.Default if nil).
	Logger *slog.Logger
	// CacheBytes is the block cache size (DefaultCacheBytes if zero).
	CacheBytes int64
	// MinSyncInterval, if positive, is the least time between two fsyncs
	// of the write-ahead log: a commit that asks for a sync sooner waits
	// for the next one. Zero (the default) spaces nothing: commits that
	// arrive while an fsync runs still share the next one.
	//
	// Why no spacing by default: pebble keeps syncing blocked for the
	// interval with a Go timer, and a timer under a millisecond fires only
	// when the runtime next wakes, up to a millisecond late on a quiet
	// node, whose poller sleeps in whole milliseconds. With 250 µs, one
	// caller's decisions took 1.37 ms instead of 0.27 (p50, loadgen -c 1)
	// and 64 coalescing callers decided 32-33k/s instead of 43-51k
	// (alternated runs on one node, 2026-12-05), for 2.5 times fewer
	// fsyncs of 120 µs each.
	MinSyncInterval time.Duration
}

// DefaultCacheBytes is the shared database's block cache. Raft reads back
// recent entries from its own cache, so pebble's serves only followers that
// fall behind and restarts.
const DefaultCacheBytes = 32 << 20

// Key layout. Every key starts with a kind byte and the group name,
// length-prefixed so that no group's keys are a prefix of another's:
//
//	'l' len(group) group index(8 bytes, big endian)  -> encoded raft.Log
//	's' len(group) group key                         -> stable-store value
const (
	kindLog    = 'l'
	kindStable = 's'
)

// DB is the shared layout: one pebble database holding the raft logs and
// stable stores of every group on the node. Open a Store per group with
// Group; close the stores (or just the DB) when done.
type DB struct {
	db    *pebble.DB
	fsync prometheus.Histogram // pebble's WAL fsync latencies; its count is the fsyncs

	mu     sync.Mutex
	groups map[string]*Store
	closed bool
}

// OpenShared opens (or creates) the shared database in dir.
func OpenShared(dir string, o Options) (*DB, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	cache := pebble.NewCache(o.CacheBytes)
	defer cache.Unref()
	po := &pebble.Options{
		Cache: cache,
		// Pinned, not FormatNewest: a later pebble must not move the files
		// to a format an older quorate cannot open (no rollback).
		FormatMajorVersion: pebble.FormatValueSeparation,
		Logger:             pebbleLogger{o.Logger},
	}
	if o.MinSyncInterval > 0 {
		interval := o.MinSyncInterval
		po.WALMinSyncInterval = func() time.Duration { return interval }
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("raftlog: open %s: %w", dir, err)
	}
	return &DB{db: db, fsync: db.Metrics().LogWriter.FsyncLatency, groups: map[string]*Store{}}, nil
}

// Group opens the store of one group. A group may be open once at a time;
// its data stays in the database when the store is closed.
func (d *DB) Group(group string) (*Store, error) {
	if group == "" || len(group) > math.MaxUint8 {
		return nil, fmt.Errorf("raftlog: group name must be 1..255 bytes, got %d", len(group))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("raftlog: database closed")
	}
	if _, ok := d.groups[group]; ok {
		return nil, fmt.Errorf("raftlog: group %q is already open", group)
	}
	g := &groupLog{
		db:           d.db,
		logPrefix:    prefix(kindLog, group),
		stablePrefix: prefix(kindStable, group),
	}
	g.lower = binary.BigEndian.AppendUint64(append([]byte(nil), g.logPrefix...), 0)
	// Every key of the group's log sorts before its prefix followed by nine
	// bytes, the first 0xff: keys carry eight.
	g.upper = append(binary.BigEndian.AppendUint64(append([]byte(nil), g.logPrefix...), math.MaxUint64), 0)
	s := &Store{b: g}
	g.release = func() {
		d.mu.Lock()
		delete(d.groups, group)
		d.mu.Unlock()
	}
	d.groups[group] = s
	return s, nil
}

// Syncs counts the fsyncs of the database's write-ahead log since it was
// opened: one per group commit, however many groups' writes it carried.
func (d *DB) Syncs() uint64 {
	var m dto.Metric
	if d.fsync == nil || d.fsync.Write(&m) != nil {
		return 0
	}
	return m.GetHistogram().GetSampleCount()
}

// Close closes every group store still open (calls into them from then on
// block forever: see Store) and then the database.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	open := make([]*Store, 0, len(d.groups))
	for _, s := range d.groups {
		open = append(open, s)
	}
	d.mu.Unlock()
	for _, s := range open {
		_ = s.Close()
	}
	return d.db.Close()
}

func prefix(kind byte, group string) []byte {
	return append([]byte{kind, byte(len(group))}, group...)
}

// groupLog is one group's view of the shared database.
type groupLog struct {
	db           *pebble.DB
	logPrefix    []byte
	stablePrefix []byte
	lower, upper []byte // bounds of the group's log keys
	release      func()
}

func (g *groupLog) close() error {
	g.release()
	return nil
}

func (g *groupLog) logKey(dst []byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, g.logPrefix...), index)
}

func (g *groupLog) FirstIndex() (uint64, error) { return g.edge(true) }

func (g *groupLog) LastIndex() (uint64, error) { return g.edge(false) }

// edge returns the first or the last index of the group's log, 0 if empty.
func (g *groupLog) edge(first bool) (uint64, error) {
	it, err := g.db.NewIter(&pebble.IterOptions{LowerBound: g.lower, UpperBound: g.upper})
	if err != nil {
		return 0, err
	}
	var ok bool
	if first {
		ok = it.First()
	} else {
		ok = it.Last()
	}
	var index uint64
	if ok {
		k := it.Key()
		index = binary.BigEndian.Uint64(k[len(k)-8:])
	}
	return index, errors.Join(it.Error(), it.Close())
}

func (g *groupLog) GetLog(index uint64, l *raft.Log) error {
	v, closer, err := g.db.Get(g.logKey(make([]byte, 0, len(g.logPrefix)+8), index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	return decodeLog(index, v, l)
}

func (g *groupLog) StoreLog(l *raft.Log) error {
	return g.StoreLogs([]*raft.Log{l})
}

// StoreLogs writes logs in one synced batch. Concurrent batches of other
// groups share the write-ahead log's fsync.
//
// Gathering more groups into each fsync does not pay here. Tried on
// 2026-12-07: writes committed without a sync, and the first of them
// yielded while others joined, then synced once for all. On one node, 64
// coalescing callers, three alternated pairs, decisions a sync rose from
// 20 to 25 but decisions a second moved x1.02, x1.00, x1.00: a call's
// cost is the node's CPU for its eight group entries, not their fsyncs.
func (g *groupLog) StoreLogs(logs []*raft.Log) error {
	b := g.db.NewBatch()
	defer b.Close()
	var key, val []byte
	for _, l := range logs {
		key = g.logKey(key[:0], l.Index)
		val = appendLog(val[:0], l)
		if err := b.Set(key, val, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// DeleteRange removes min..max with one range tombstone, whatever the
// number of entries.
func (g *groupLog) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	end := g.upper
	if max < math.MaxUint64 {
		end = g.logKey(nil, max+1)
	}
	b := g.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(g.logKey(nil, min), end, nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

func (g *groupLog) stableKey(key []byte) []byte {
	return append(append(make([]byte, 0, len(g.stablePrefix)+len(key)), g.stablePrefix...), key...)
}

func (g *groupLog) Set(key, val []byte) error {
	return g.db.Set(g.stableKey(key), val, pebble.Sync)
}

func (g *groupLog) Get(key []byte) ([]byte, error) {
	v, closer, err := g.db.Get(g.stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

func (g *groupLog) SetUint64(key []byte, val uint64) error {
	return g.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (g *groupLog) GetUint64(key []byte) (uint64, error) {
	v, err := g.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftlog: stable key %q holds %d bytes, not a uint64", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// pebbleLogger routes pebble's logs to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is called by pebble only when it cannot go on: corruption it
// cannot recover from, or a write or fsync of its WAL that failed (a full
// disk), after which its commit pipeline is broken. Log it and stop the
// process: the failed batch was never acknowledged, what was synced before
// it is intact, and a restart replays the WAL.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble")
	panic("raftlog: pebble: " + msg)
}
