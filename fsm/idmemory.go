package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/internal/binenc"
)

// idMemory remembers decisions by request id, in log order, for a window of
// group time, in about a third of what a map of full entries costs (see
// idRecordBytes).
//
// A decision is kept as a record in append-only chunks of bytes: the
// digest of its client and request id, then the decision in varints. An
// open-addressing table of 4-byte slots finds a record by digest. Records
// are forgotten oldest first, by group time (expire) or, below
// ClusterVersionIDMemory, by count (put); everything depends only on the
// order of puts and their stamps, so replicas agree on what is remembered
// even though their tables differ.
//
// Below ClusterVersionIDMemory a record also keeps its client and request
// id, because format 3 snapshots, which the binaries of that version read,
// hold them; from it on, snapshots hold the digests (format 4).
type idMemory struct {
	window int64
	forgot func(origin uint64) // may be nil

	chunks  []idChunk // oldest first; chunks[0] has sequence number headSeq
	headSeq uint64
	head    int // offset in chunks[0] of the oldest record
	count   int

	slots []uint32 // 0: empty; else 1 + the record's position (see pos)
	used  int      // non-empty slots: count
}

// idDigest names a request id: the first 16 bytes of SHA-256 over the
// client id's length, the client id and the request id. Finding two
// requests with one digest is as hard as a 128-bit collision of SHA-256.
type idDigest [16]byte

func digestOf(client, id string) idDigest {
	var buf [2*binary.MaxVarintLen64 + MaxClientLen + MaxRequestIDLen]byte
	b := binary.AppendUvarint(buf[:0], uint64(len(client)))
	b = append(b, client...)
	b = append(b, id...)
	sum := sha256.Sum256(b)
	return idDigest(sum[:16])
}

// idChunk is one chunk of records. Bytes before len(b) never change once
// written, so a snapshot may read them while applies go on.
type idChunk struct{ b []byte }

// idChunkSize is the capacity of a chunk; a record never spans two.
const idChunkSize = 1 << 16

// A record starts at a multiple of 4 bytes in its chunk (appendIDRecord
// pads it), and its position is its chunk's sequence number modulo 2^18
// and its offset in 4-byte words: 32 bits, unambiguous while fewer than
// 2^18 chunks (16 GiB of records) are held, which maxRequestIDMax ensures.
const (
	posWordShift = 14 // 64 KiB of 4-byte words
	posChunkMask = 1<<18 - 1
)

// maxUnnamedRecord bounds a record without names, padded; maxRequestIDMax
// is the most such records 2^18 chunks hold.
const (
	maxUnnamedRecord = (18 + bucket.MaxTierNameLen + len(bucket.DefaultTierName) + 9*binary.MaxVarintLen64 + 3) &^ 3
	maxRequestIDMax  = (posChunkMask + 1) * (idChunkSize / maxUnnamedRecord)
)

// idRecordBytes bounds what remembering one decision by digest costs: its
// record (about 60 bytes with the default tier) and its share of the slot
// table (at most half full: 8 to 16 bytes). BenchmarkStateBytes measures it.
const idRecordBytes = 80

// recNamed, in a record's first byte, says the record keeps its client and
// request id.
const recNamed = 1

func newIDMemory(window int64, forgot func(uint64)) *idMemory {
	return &idMemory{window: window, forgot: forgot}
}

func (m *idMemory) len() int { return m.count }

// bytes is the memory the records and the table take.
func (m *idMemory) bytes() int64 {
	return int64(len(m.chunks))*idChunkSize + int64(len(m.slots))*4
}

// get returns the decision remembered under d.
func (m *idMemory) get(d idDigest) (Decision, bool) {
	if len(m.slots) == 0 {
		return Decision{}, false
	}
	mask := uint64(len(m.slots) - 1)
	for i := slotOf(d) & mask; ; i = (i + 1) & mask {
		s := m.slots[i]
		if s == 0 {
			return Decision{}, false
		}
		rec := m.record(s - 1)
		if idDigest(rec[:16]) == d {
			dec, _ := decodeIDRecord(rec)
			return dec.decision, true
		}
	}
}

// maxIDRecord bounds a record's length.
const maxIDRecord = 18 + 3*binary.MaxVarintLen16 + MaxClientLen + MaxRequestIDLen + bucket.MaxTierNameLen + len(bucket.DefaultTierName) + 9*binary.MaxVarintLen64

// put remembers dec under d, which is not remembered yet. named keeps the
// client and request id in the record (below ClusterVersionIDMemory). With
// evictAt above 0, the oldest records are forgotten first to keep fewer
// than evictAt; put returns how many and the newest one's stamp.
func (m *idMemory) put(d idDigest, client, id string, named bool, dec Decision, evictAt int) (evicted int, newest int64) {
	for evictAt > 0 && m.count >= evictAt {
		newest = m.dropOldest().Stamp
		evicted++
	}
	last := len(m.chunks) - 1
	if last < 0 || len(m.chunks[last].b)+maxIDRecord > idChunkSize {
		m.chunks = append(m.chunks, idChunk{b: make([]byte, 0, idChunkSize)})
		last++
	}
	c := &m.chunks[last]
	off := len(c.b)
	c.b = appendIDRecord(c.b, d, client, id, named, dec)
	m.count++
	m.insert(uint32((m.headSeq+uint64(last))&posChunkMask)<<posWordShift | uint32(off/4))
	return evicted, newest
}

// expire forgets records older than the window at group time now and
// returns how many it forgot.
func (m *idMemory) expire(now int64) int {
	n := 0
	for m.expired(now) {
		m.dropOldest()
		n++
	}
	return n
}

// expired reports whether the oldest record is older than the window at
// group time now: whether expire(now) would forget anything.
func (m *idMemory) expired(now int64) bool {
	if m.count == 0 {
		return false
	}
	r, _ := decodeIDRecord(m.chunks[0].b[m.head:])
	return r.decision.Stamp < now-m.window
}

// dropOldest forgets the oldest record and returns its decision.
func (m *idMemory) dropOldest() Decision {
	c := &m.chunks[0]
	r, n := decodeIDRecord(c.b[m.head:])
	m.remove(r.digest)
	m.count--
	m.head += n
	if m.head == len(c.b) && (len(m.chunks) > 1 || m.count == 0) {
		m.chunks[0] = idChunk{} // a snapshot may still hold it; this memory does not
		m.chunks = m.chunks[1:]
		m.headSeq++
		m.head = 0
		if len(m.chunks) == 0 {
			m.chunks = nil
		}
	}
	if m.forgot != nil {
		m.forgot(r.decision.Origin)
	}
	m.shrink()
	return r.decision
}

// view returns the records held now, for a snapshot to read later: the
// chunks' bytes up to their current length, which later puts do not touch.
func (m *idMemory) view() []idChunk {
	out := make([]idChunk, len(m.chunks))
	for i, c := range m.chunks {
		b := c.b[:len(c.b):len(c.b)]
		if i == 0 {
			b = b[m.head:]
		}
		out[i] = idChunk{b: b}
	}
	return out
}

// eachInView calls fn for every record of a view, oldest first.
func eachInView(view []idChunk, fn func(idRecord)) {
	for _, c := range view {
		for b := c.b; len(b) > 0; {
			r, n := decodeIDRecord(b)
			fn(r)
			b = b[n:]
		}
	}
}

func slotOf(d idDigest) uint64 { return binary.LittleEndian.Uint64(d[:8]) }

func (m *idMemory) chunkAt(pos uint32) *idChunk {
	i := (uint64(pos>>posWordShift) - m.headSeq) & posChunkMask
	return &m.chunks[i]
}

func (m *idMemory) record(pos uint32) []byte {
	return m.chunkAt(pos).b[4*(pos&(1<<posWordShift-1)):]
}

func (m *idMemory) digestAt(pos uint32) idDigest { return idDigest(m.record(pos)[:16]) }

// insert adds the record at pos to the table, growing it to stay at most
// half full.
func (m *idMemory) insert(pos uint32) {
	if 2*(m.used+1) > len(m.slots) {
		m.resize(max(16, 2*len(m.slots)))
	}
	m.place(pos)
}

func (m *idMemory) place(pos uint32) {
	mask := uint64(len(m.slots) - 1)
	i := slotOf(m.digestAt(pos)) & mask
	for m.slots[i] != 0 {
		i = (i + 1) & mask
	}
	m.slots[i] = pos + 1
	m.used++
}

// remove takes d's record out of the table, moving back the records after
// it in its run that would no longer be found (linear probing's deletion).
func (m *idMemory) remove(d idDigest) {
	mask := uint64(len(m.slots) - 1)
	i := slotOf(d) & mask
	for m.digestAt(m.slots[i]-1) != d {
		i = (i + 1) & mask
	}
	m.slots[i] = 0
	m.used--
	for j := (i + 1) & mask; m.slots[j] != 0; j = (j + 1) & mask {
		home := slotOf(m.digestAt(m.slots[j]-1)) & mask
		// The record at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if (j-home)&mask >= (j-i)&mask {
			m.slots[i], m.slots[j] = m.slots[j], 0
			i = j
		}
	}
}

// shrink halves the table while it is less than an eighth full, so that a
// burst of ids does not hold its table for good.
func (m *idMemory) shrink() {
	if len(m.slots) > 16 && 8*m.used < len(m.slots) {
		m.resize(max(16, 1<<bits.Len(uint(4*m.used))))
	}
	if m.count == 0 {
		m.slots, m.used = nil, 0
	}
}

func (m *idMemory) resize(n int) {
	old := m.slots
	m.slots, m.used = make([]uint32, n), 0
	for _, s := range old {
		if s != 0 {
			m.place(s - 1)
		}
	}
}

// idRecord is a decoded record.
type idRecord struct {
	digest     idDigest
	named      bool
	client, id string // when named
	decision   Decision
}

// appendIDRecord appends a record: the digest, whether it is named (and
// then the names), the decision as a format 3 snapshot holds it, and zeros
// to a multiple of 4 bytes. b's length must be a multiple of 4.
func appendIDRecord(b []byte, d idDigest, client, id string, named bool, dec Decision) []byte {
	b = append(b, d[:]...)
	if named {
		b = append(b, recNamed)
		b = binenc.AppendString(b, client)
		b = binenc.AppendString(b, id)
	} else {
		b = append(b, 0)
	}
	b = appendDecision(b, dec, 3)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// decodeIDRecord decodes the record b starts with and returns its length,
// padding included.
func decodeIDRecord(b []byte) (idRecord, int) {
	r := idRecord{digest: idDigest(b[:16]), named: b[16] == recNamed}
	rd := &reader{binenc.Reader{B: b[17:]}}
	if r.named {
		r.client, r.id = rd.Str(MaxClientLen), rd.Str(MaxRequestIDLen)
	}
	r.decision = rd.decision(3)
	if rd.Err != nil {
		panic("fsm: a request id record does not decode: " + rd.Err.Error())
	}
	return r, (len(b) - len(rd.B) + 3) &^ 3
}

// validateIDs checks the decisions remembered by request id: unique, in
// log order, not after the group's time.
func (s *snapshot) validateIDs() error {
	seen := make(map[idDigest]bool, len(s.idRecords))
	for i, r := range s.idRecords {
		switch {
		case r.named && (r.client == "" || len(r.client) > MaxClientLen):
			return fmt.Errorf("remembered decision %d: client id of %d bytes", i, len(r.client))
		case r.named && (len(r.id) == 0 || len(r.id) > MaxRequestIDLen):
			return fmt.Errorf("remembered decision %d: request id of %d bytes", i, len(r.id))
		case seen[r.digest]:
			return fmt.Errorf("remembered decision %d: request id %x remembered twice", i, r.digest)
		}
		if err := checkRemembered(i, r.decision, s.idRecords[max(i-1, 0)].decision.Stamp, s.highWater); err != nil {
			return err
		}
		seen[r.digest] = true
	}
	return nil
}

// idCount is how many decisions the snapshot remembers by request id.
func (s *snapshot) idCount() int {
	if s.idRecords != nil {
		return len(s.idRecords)
	}
	n := 0
	eachInView(s.ids, func(idRecord) { n++ })
	return n
}

// eachID calls fn for every decision remembered by request id, oldest
// first.
func (s *snapshot) eachID(fn func(idRecord)) {
	if s.idRecords != nil {
		for _, r := range s.idRecords {
			fn(r)
		}
		return
	}
	eachInView(s.ids, fn)
}
