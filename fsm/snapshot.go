package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/bucket"
)

// snapshotMagic opens every snapshot; the byte after it is the format version.
const (
	snapshotMagic   = "QRSNAP"
	snapshotVersion = 1
)

// ErrBadSnapshot is returned (wrapped) by Restore for bytes that are not a
// snapshot this version can read.
var ErrBadSnapshot = errors.New("bad snapshot")

// snapshot is a point-in-time copy of the state, encoded in Persist.
type snapshot struct {
	applied   uint64
	highWater int64
	config    bucket.Config
	tiers     map[string]string
	buckets   map[string]bucket.State
	dedup     []dedupEntry
}

// Snapshot copies the state; the copy is encoded later, concurrently with
// new applies. See raft.FSM.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &snapshot{
		applied:   f.applied,
		highWater: f.highWater,
		config:    f.config,
		tiers:     maps.Clone(f.tiers),
		buckets:   maps.Clone(f.buckets),
		dedup:     slices.Clone(f.dedup.order),
	}, nil
}

// Persist writes the snapshot. The bytes depend only on the state: maps are
// written in sorted key order.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 1<<16)
	if err := s.writeTo(w); err != nil {
		_ = sink.Cancel()
		return err
	}
	if err := w.Flush(); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release does nothing: the snapshot holds only copies.
func (s *snapshot) Release() {}

// MarshalSnapshot returns the snapshot bytes of the current state, exactly
// as Persist would write them. Tests compare replicas with it.
func (f *FSM) MarshalSnapshot() []byte {
	snap, _ := f.Snapshot()
	var buf bytes.Buffer
	_ = snap.(*snapshot).writeTo(&buf)
	return buf.Bytes()
}

func (s *snapshot) writeTo(w io.Writer) error {
	b := make([]byte, 0, 1<<12)
	flush := func(force bool) error {
		if len(b) < 1<<15 && !force {
			return nil
		}
		_, err := w.Write(b)
		b = b[:0]
		return err
	}
	b = append(b, snapshotMagic...)
	b = append(b, snapshotVersion)
	b = binary.AppendUvarint(b, s.applied)
	b = binary.AppendVarint(b, s.highWater)
	b = appendConfig(b, s.config)

	b = binary.AppendUvarint(b, uint64(len(s.tiers)))
	for _, c := range slices.Sorted(maps.Keys(s.tiers)) {
		b = appendString(b, c)
		b = appendString(b, s.tiers[c])
		if err := flush(false); err != nil {
			return err
		}
	}
	b = binary.AppendUvarint(b, uint64(len(s.buckets)))
	for _, c := range slices.Sorted(maps.Keys(s.buckets)) {
		st := s.buckets[c]
		b = appendString(b, c)
		b = binary.AppendVarint(b, st.Tokens)
		b = binary.AppendVarint(b, st.Carry)
		b = binary.AppendVarint(b, st.Last)
		if err := flush(false); err != nil {
			return err
		}
	}
	b = binary.AppendUvarint(b, uint64(len(s.dedup)))
	for _, e := range s.dedup {
		b = appendString(b, e.key.client)
		b = appendString(b, e.key.id)
		b = appendDecision(b, e.decision)
		if err := flush(false); err != nil {
			return err
		}
	}
	return flush(true)
}

func appendDecision(b []byte, d Decision) []byte {
	flags := byte(0)
	if d.Allowed {
		flags = 1
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, d.Remaining)
	b = binary.AppendVarint(b, d.Limit)
	b = binary.AppendVarint(b, d.RetryAfter)
	b = binary.AppendVarint(b, d.ResetAfter)
	b = appendString(b, d.Tier)
	return binary.AppendVarint(b, d.Stamp)
}

// Restore replaces the state with a snapshot written by Persist. On error
// the state is left as it was.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	s, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := newDedupWindow(f.dedup.window, f.dedup.max)
	for _, e := range s.dedup {
		d.put(e.key.client, e.key.id, e.decision)
	}
	f.reset(d)
	f.applied = s.applied
	f.highWater = s.highWater
	f.config = s.config
	f.version.Store(s.config.Version)
	f.tiers = s.tiers
	f.buckets = s.buckets
	return nil
}

func decodeSnapshot(data []byte) (*snapshot, error) {
	if len(data) < len(snapshotMagic)+1 || string(data[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("%w: missing header", ErrBadSnapshot)
	}
	if v := data[len(snapshotMagic)]; v != snapshotVersion {
		return nil, fmt.Errorf("%w: format version %d, this node reads %d", ErrBadSnapshot, v, snapshotVersion)
	}
	r := &reader{b: data[len(snapshotMagic)+1:]}
	s := &snapshot{applied: r.uvarint(), highWater: r.varint(), config: r.config()}
	n := r.count(2)
	s.tiers = make(map[string]string, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		s.tiers[r.str(MaxClientLen)] = r.str(bucket.MaxTierNameLen)
	}
	n = r.count(4)
	s.buckets = make(map[string]bucket.State, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		c := r.str(MaxClientLen)
		s.buckets[c] = bucket.State{Tokens: r.varint(), Carry: r.varint(), Last: r.varint()}
	}
	n = r.count(9)
	s.dedup = make([]dedupEntry, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		k := dedupKey{client: r.str(MaxClientLen), id: r.str(MaxRequestIDLen)}
		var d Decision
		d.Allowed = r.byte() == 1
		d.Remaining = r.varint()
		d.Limit = r.varint()
		d.RetryAfter = r.varint()
		d.ResetAfter = r.varint()
		d.Tier = r.str(bucket.MaxTierNameLen + len(bucket.DefaultTierName))
		d.Stamp = r.varint()
		s.dedup = append(s.dedup, dedupEntry{key: k, decision: d})
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, r.err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	return s, nil
}

// validate checks the values a snapshot holds, not just its format: a
// restored state must be one that applying entries could have produced.
func (s *snapshot) validate() error {
	if err := Validate(InstallConfig{Config: s.config}); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	for client, tier := range s.tiers {
		if err := Validate(SetTier{Client: client, Tier: tier}); err != nil || tier == "" {
			return fmt.Errorf("tier assignment %q -> %q: invalid", client, tier)
		}
	}
	for client, st := range s.buckets {
		switch {
		case client == "" || len(client) > MaxClientLen:
			return fmt.Errorf("bucket of a client id of %d bytes", len(client))
		case st.Tokens < 0 || st.Tokens > bucket.MaxCapacity*bucket.Scale:
			return fmt.Errorf("bucket %q: balance %d nanotokens outside 0..%d", client, st.Tokens, int64(bucket.MaxCapacity)*bucket.Scale)
		case st.Carry < 0 || st.Carry >= bucket.Scale:
			return fmt.Errorf("bucket %q: carry %d outside 0..%d", client, st.Carry, bucket.Scale-1)
		case st.Last > s.highWater:
			return fmt.Errorf("bucket %q: last decision at %d, after the group's time %d", client, st.Last, s.highWater)
		}
	}
	seen := make(map[dedupKey]bool, len(s.dedup))
	var prev int64
	for i, e := range s.dedup {
		switch {
		case e.key.client == "" || len(e.key.client) > MaxClientLen || len(e.key.id) == 0 || len(e.key.id) > MaxRequestIDLen:
			return fmt.Errorf("request id %d: client id of %d bytes, id of %d bytes", i, len(e.key.client), len(e.key.id))
		case seen[e.key]:
			return fmt.Errorf("request id %q of client %q remembered twice", e.key.id, e.key.client)
		case i > 0 && e.decision.Stamp < prev:
			return fmt.Errorf("request ids not in log order at %d", i)
		case e.decision.Stamp > s.highWater:
			return fmt.Errorf("request id %q decided at %d, after the group's time %d", e.key.id, e.decision.Stamp, s.highWater)
		}
		seen[e.key] = true
		prev = e.decision.Stamp
	}
	return nil
}

// count reads an element count and checks that it could fit in the bytes
// left, each element taking at least minSize bytes.
func (r *reader) count(minSize int) uint64 {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)/minSize) {
		r.fail("%d elements in %d bytes", n, len(r.b))
		return 0
	}
	return n
}
