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
	"github.com/quorate/quorate/internal/binenc"
)

// snapshotMagic opens every snapshot; the byte after it is the format
// version. Version 2 added origins: each remembered decision's origin, the
// decisions remembered by origin, and the marks of forgotten origins.
// Version 3 adds the cluster version and the count of origin epochs
// allocated, and a remembered decision's rate: a second flag bit says one
// follows the decision's origin (formats 1 and 2 restore every rate as not
// known, Decision.RateKnown false). It is written only once the cluster
// version is above
// BaseClusterVersion: until then a snapshot is version 2, which the
// binaries of the release before can install. Format 3 also writes the
// configuration with the policies and fills of cluster version 2, the
// sliding windows after everything else, and decisions' shadow flag and
// window. Version 4, written once the cluster version reaches
// ClusterVersionIDMemory, holds each decision remembered by request id
// under its digest (idDigest) instead of its client and request id. Every
// version is still read.
const (
	snapshotMagic   = "QRSNAP"
	snapshotVersion = 4
)

// ErrBadSnapshot is returned (wrapped) by Restore for bytes that are not a
// snapshot this version can read.
var ErrBadSnapshot = errors.New("bad snapshot")

// snapshot is a point-in-time view of the state, encoded in Persist. The
// FSM's maps are not copied: their parts are frozen (see cowMap) until
// Release. A decoded snapshot holds plain maps, in one part each.
type snapshot struct {
	applied   uint64
	highWater int64
	config    bucket.Config
	tiers     frozenTiers
	buckets   frozenMap[bucket.State]
	windows   frozenMap[bucket.Window]
	records   frozenRecords
	audit     []AuditEntry
	hold      *snapshotHold // nil for a decoded snapshot
	ids       []idChunk     // by request id: a view of the FSM's records
	idRecords []idRecord    // the same, for a decoded snapshot
	byOrigin  []dedupEntry  // by origin
	marks     map[uint32]originMark
	// idsForgottenUntil, clusterVersion and epochsAllocated: see FSM.
	idsForgottenUntil int64
	clusterVersion    uint32
	epochsAllocated   uint64
}

// Snapshot takes a view of the state, encoded later, concurrently with new
// applies (see raft.FSM). It holds the FSM's lock for a constant time
// whatever the state's size: buckets and tier assignments are frozen, not
// copied (the next write to a frozen part copies that part), and the
// remembered decisions are append-only slices it keeps a prefix of.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	hold := &snapshotHold{}
	return &snapshot{
		applied:   f.applied,
		highWater: f.highWater,
		config:    f.config,
		tiers:     f.tiers.freeze(hold),
		buckets:   f.buckets.freeze(hold),
		windows:   f.windows.freeze(hold),
		records:   f.records.freeze(hold),
		audit:     f.audit[:len(f.audit):len(f.audit)],
		hold:      hold,
		ids:       f.ids.view(),
		byOrigin:  f.byOrigin.order[:len(f.byOrigin.order):len(f.byOrigin.order)],
		marks:     maps.Clone(f.marks),

		idsForgottenUntil: f.idsForgottenUntil,
		clusterVersion:    f.clusterVersion,
		epochsAllocated:   f.epochsAllocated,
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

// Release lets the FSM write the parts this snapshot froze in place again.
func (s *snapshot) Release() {
	if s.hold != nil {
		s.hold.released.Store(true)
	}
}

// MarshalSnapshot returns the snapshot bytes of the current state, exactly
// as Persist would write them. Tests compare replicas with it.
func (f *FSM) MarshalSnapshot() []byte {
	snap, _ := f.Snapshot()
	defer snap.Release()
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
	format := byte(snapshotVersion)
	switch {
	case s.clusterVersion < ClusterVersionOriginsAlways:
		format = 2
	case s.clusterVersion < ClusterVersionIDMemory:
		format = 3
	}
	b = append(b, snapshotMagic...)
	b = append(b, format)
	b = binary.AppendUvarint(b, s.applied)
	b = binary.AppendVarint(b, s.highWater)
	b = appendConfig(b, s.config, format >= 3)

	b = binary.AppendUvarint(b, uint64(s.tiers.len()))
	for _, e := range s.tiers.sorted() {
		b = binenc.AppendString(b, e.k)
		b = binenc.AppendString(b, e.v)
		if err := flush(false); err != nil {
			return err
		}
	}
	b = binary.AppendUvarint(b, uint64(s.buckets.len()))
	for _, e := range s.buckets.sorted() {
		c, st := e.k, e.v
		b = binenc.AppendString(b, c)
		b = binary.AppendVarint(b, st.Tokens)
		b = binary.AppendVarint(b, st.Carry)
		b = binary.AppendVarint(b, st.Last)
		if err := flush(false); err != nil {
			return err
		}
	}
	b = binary.AppendUvarint(b, uint64(s.idCount()))
	var err error
	s.eachID(func(r idRecord) {
		if format >= 4 {
			b = append(b, r.digest[:]...)
		} else {
			// Below ClusterVersionIDMemory every record is named.
			b = binenc.AppendString(b, r.client)
			b = binenc.AppendString(b, r.id)
		}
		b = appendDecision(b, r.decision, format)
		if err == nil {
			err = flush(false)
		}
	})
	if err != nil {
		return err
	}
	b = binary.AppendUvarint(b, uint64(len(s.byOrigin)))
	for _, e := range s.byOrigin {
		b = binenc.AppendString(b, e.key.client)
		b = appendDecision(b, e.decision, format) // its origin is the key's
		if err := flush(false); err != nil {
			return err
		}
	}
	b = binary.AppendUvarint(b, uint64(len(s.marks)))
	for _, e := range slices.Sorted(maps.Keys(s.marks)) {
		b = binary.AppendUvarint(b, uint64(e))
		b = binary.AppendUvarint(b, s.marks[e].seq)
		b = binary.AppendVarint(b, s.marks[e].at)
	}
	b = binary.AppendVarint(b, s.idsForgottenUntil)
	if format >= 3 {
		b = binary.AppendUvarint(b, uint64(s.clusterVersion))
		b = binary.AppendUvarint(b, s.epochsAllocated)
		b = binary.AppendUvarint(b, uint64(s.windows.len()))
		for _, e := range s.windows.sorted() {
			b = binenc.AppendString(b, e.k)
			b = binary.AppendUvarint(b, uint64(len(e.v.Log)))
			for _, a := range e.v.Log {
				b = binary.AppendVarint(b, a.At)
				b = binary.AppendUvarint(b, uint64(a.Cost))
			}
			if err := flush(false); err != nil {
				return err
			}
		}
		b = s.appendAudit(b)
		b = binary.AppendUvarint(b, uint64(s.records.len()))
		for _, e := range s.records.sorted() {
			b = appendRecord(b, e.k, e.v)
			if err := flush(false); err != nil {
				return err
			}
		}
	}
	return flush(true)
}

// The flags byte of a remembered decision. Formats 1 and 2 write only
// snapAllowed (and read anything else as not allowed); format 3 refuses
// bits it does not know.
const (
	snapAllowed   = 1 << iota
	snapRateKnown // format 3: the rate follows the origin
	snapShadow    // format 3: a decision of a policy in shadow mode
	snapWindow    // format 3: the window follows the rate (or the origin)
)

func appendDecision(b []byte, d Decision, format byte) []byte {
	flags := byte(0)
	if d.Allowed {
		flags = snapAllowed
	}
	rate := format >= 3 && d.RateKnown
	if rate {
		flags |= snapRateKnown
	}
	if format >= 3 && d.Shadow {
		flags |= snapShadow
	}
	window := format >= 3 && d.Window != 0
	if window {
		flags |= snapWindow
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, d.Remaining)
	b = binary.AppendVarint(b, d.Limit)
	b = binary.AppendVarint(b, d.RetryAfter)
	b = binary.AppendVarint(b, d.ResetAfter)
	b = binenc.AppendString(b, d.Tier)
	b = binary.AppendVarint(b, d.Stamp)
	b = binary.AppendUvarint(b, d.Origin)
	if rate {
		b = binary.AppendVarint(b, d.Rate)
	}
	if window {
		b = binary.AppendVarint(b, d.Window)
	}
	return b
}

func (r *reader) decision(version byte) Decision {
	var d Decision
	flags := r.Byte()
	d.Allowed = flags == snapAllowed
	if version >= 3 {
		if r.Err == nil && flags&^(snapAllowed|snapRateKnown|snapShadow|snapWindow) != 0 {
			r.Fail("remembered decision flags %#x", flags)
		}
		d.Allowed, d.Shadow = flags&snapAllowed != 0, flags&snapShadow != 0
	}
	d.Remaining = r.Varint()
	d.Limit = r.Varint()
	d.RetryAfter = r.Varint()
	d.ResetAfter = r.Varint()
	d.Tier = r.Str(bucket.MaxTierNameLen + len(bucket.DefaultTierName))
	d.Stamp = r.Varint()
	if version >= 2 {
		d.Origin = r.Uvarint()
	}
	if version >= 3 && flags&snapRateKnown != 0 {
		d.Rate, d.RateKnown = r.Varint(), true
	}
	if version >= 3 && flags&snapWindow != 0 {
		d.Window = r.Varint()
	}
	return d
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
	f.reset()
	f.highWater = s.highWater // before the puts: forgetting stamps marks with it
	f.marks = s.marks
	f.idsForgottenUntil = s.idsForgottenUntil
	f.clusterVersion = s.clusterVersion
	f.clusterVersionRead.Store(s.clusterVersion)
	f.epochsAllocated = s.epochsAllocated
	for _, r := range s.idRecords {
		f.ids.put(r.digest, r.client, r.id, r.named, r.decision, 0)
	}
	for _, e := range s.byOrigin {
		f.byOrigin.put(e.key, e.decision)
	}
	f.applied = s.applied
	f.highWater = s.highWater
	f.config = s.config
	f.version.Store(s.config.Version)
	f.buckets = cowMapOf(s.buckets[0])
	for client := range s.buckets[0] {
		f.mapBytes += bucketBytes(client)
	}
	if len(s.windows) > 0 {
		f.windows = cowMapOf(s.windows[0])
		for client, w := range s.windows[0] {
			f.mapBytes += bucketBytes(client) + bucket.WindowBytes(w)
		}
	}
	s.tiers.each(func(client, tier string) {
		f.tiers.set(client, tier)
		f.mapBytes += tierBytes(client)
	})
	s.records.each(func(client string, r ClientRecord) {
		f.records.set(client, r)
		f.mapBytes += recordBytes(client)
	})
	f.floorRecords()
	f.audit = s.audit
	for _, e := range s.audit {
		f.mapBytes += auditBytes(e)
	}
	f.settle()
	return nil
}

func decodeSnapshot(data []byte) (*snapshot, error) {
	if len(data) < len(snapshotMagic)+1 || string(data[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("%w: missing header", ErrBadSnapshot)
	}
	version := data[len(snapshotMagic)]
	if version < 1 || version > snapshotVersion {
		return nil, fmt.Errorf("%w: format version %d, this node reads 1..%d", ErrBadSnapshot, version, snapshotVersion)
	}
	r := &reader{binenc.Reader{B: data[len(snapshotMagic)+1:]}}
	s := &snapshot{applied: r.Uvarint(), highWater: r.Varint(), config: r.config(version >= 3)}
	n := r.Count(2)
	tiers := make(map[string]string, n)
	for i := uint64(0); i < n && r.Err == nil; i++ {
		tiers[r.Str(MaxClientLen)] = r.Str(bucket.MaxTierNameLen)
	}
	s.tiers = frozenTiersOf(tiers)
	n = r.Count(4)
	buckets := make(map[string]bucket.State, n)
	s.buckets = frozenMap[bucket.State]{buckets}
	for i := uint64(0); i < n && r.Err == nil; i++ {
		c := r.Str(MaxClientLen)
		buckets[c] = bucket.State{Tokens: r.Varint(), Carry: r.Varint(), Last: r.Varint()}
	}
	n = r.Count(9)
	s.idRecords = make([]idRecord, 0, n)
	for i := uint64(0); i < n && r.Err == nil; i++ {
		var rec idRecord
		if version >= 4 {
			copy(rec.digest[:], r.Fixed(len(rec.digest)))
		} else {
			rec.named, rec.client, rec.id = true, r.Str(MaxClientLen), r.Str(MaxRequestIDLen)
			rec.digest = digestOf(rec.client, rec.id)
		}
		rec.decision = r.decision(version)
		s.idRecords = append(s.idRecords, rec)
	}
	s.marks = map[uint32]originMark{}
	if version >= 2 {
		n = r.Count(9)
		s.byOrigin = make([]dedupEntry, 0, n)
		for i := uint64(0); i < n && r.Err == nil; i++ {
			c := r.Str(MaxClientLen)
			d := r.decision(version)
			s.byOrigin = append(s.byOrigin, dedupEntry{key: dedupKey{client: c, origin: d.Origin}, decision: d})
		}
		n = r.Count(3)
		for i := uint64(0); i < n && r.Err == nil; i++ {
			e := r.Uvarint()
			if e >= 1<<24 {
				r.Fail("origin epoch %#x", e)
			}
			if _, dup := s.marks[uint32(e)]; dup {
				r.Fail("origin epoch %#x marked twice", e)
			}
			s.marks[uint32(e)] = originMark{seq: r.Uvarint(), at: r.Varint()}
		}
		s.idsForgottenUntil = r.Varint()
	}
	s.clusterVersion = BaseClusterVersion
	if version >= 3 {
		v := r.Uvarint()
		lo, hi := uint64(ClusterVersionOriginsAlways), uint64(ClusterVersionIDMemory)-1 // format 3
		if version >= 4 {
			lo, hi = uint64(ClusterVersionIDMemory), uint64(MaxClusterVersion)
		}
		if r.Err == nil && (v < lo || v > hi) {
			r.Fail("cluster version %d in a format %d snapshot, which holds %d..%d", v, version, lo, hi)
		}
		s.clusterVersion = uint32(v)
		s.epochsAllocated = r.Uvarint()
		n = r.Count(2)
		windows := make(map[string]bucket.Window, n)
		s.windows = frozenMap[bucket.Window]{windows}
		for i := uint64(0); i < n && r.Err == nil; i++ {
			c := r.Str(MaxClientLen)
			m := r.Count(2)
			if r.Err == nil && m > bucket.MaxWindowLimit {
				r.Fail("window of %q with %d admissions, at most %d", c, m, bucket.MaxWindowLimit)
			}
			w := bucket.Window{Log: make([]bucket.Admission, 0, m)}
			for j := uint64(0); j < m && r.Err == nil; j++ {
				a := bucket.Admission{At: r.Varint(), Cost: int64(min(r.Uvarint(), bucket.MaxWindowLimit+1))}
				w.Log = append(w.Log, a)
				w.Used += a.Cost
			}
			if _, dup := windows[c]; dup {
				r.Fail("window of %q twice", c)
			}
			windows[c] = w
		}
		r.readAudit(s)
	}
	if r.Err == nil && len(r.B) != 0 {
		r.Fail("%d trailing bytes", len(r.B))
	}
	if r.Err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, r.Err)
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
	var bad error
	s.tiers.each(func(client, tier string) {
		if err := Validate(SetTier{Client: client, Tier: tier}); bad == nil && (err != nil || tier == "") {
			bad = fmt.Errorf("tier assignment %q -> %q: invalid", client, tier)
		}
	})
	if bad != nil {
		return bad
	}
	for client, st := range s.buckets[0] {
		switch {
		case client == "" || len(client) > MaxClientLen:
			return fmt.Errorf("bucket of a client id of %d bytes", len(client))
		case st.Tokens < 0 || st.Tokens > bucket.MaxCapacity*bucket.Scale:
			return fmt.Errorf("bucket %q: balance %d nanotokens outside 0..%d", client, st.Tokens, int64(bucket.MaxCapacity)*bucket.Scale)
		case st.Carry < 0 || st.Carry >= bucket.Scale:
			return fmt.Errorf("bucket %q: carry %d outside 0..%d", client, st.Carry, bucket.Scale-1)
		case st.Last > s.highWater:
			return fmt.Errorf("bucket %q: last decision at %d, after the group's time %d", client, st.Last, s.highWater)
		case s.policyOf(client).Algorithm != bucket.TokenBucket:
			return fmt.Errorf("bucket %q under a policy that is not a token bucket", client)
		}
	}
	for client, w := range s.windowMap() {
		_, inBuckets := s.buckets[0][client]
		switch {
		case client == "" || len(client) > MaxClientLen:
			return fmt.Errorf("window of a client id of %d bytes", len(client))
		case inBuckets:
			return fmt.Errorf("client %q has both a bucket and a window", client)
		case s.policyOf(client).Algorithm != bucket.SlidingWindow:
			return fmt.Errorf("window %q under a policy that is not a sliding window", client)
		case w.Used > bucket.MaxWindowLimit:
			return fmt.Errorf("window %q: %d admissions of %d in all", client, len(w.Log), w.Used)
		}
		for i, a := range w.Log {
			switch {
			case a.Cost < 1:
				return fmt.Errorf("window %q: an admission of cost %d", client, a.Cost)
			case a.At > s.highWater:
				return fmt.Errorf("window %q: an admission at %d, after the group's time %d", client, a.At, s.highWater)
			case i > 0 && a.At < w.Log[i-1].At:
				return fmt.Errorf("window %q: admissions out of order", client)
			}
		}
	}
	if err := s.validateAudit(); err != nil {
		return err
	}
	if err := s.validateIDs(); err != nil {
		return err
	}
	if err := s.validateOrigins(); err != nil {
		return err
	}
	if s.idsForgottenUntil < 0 || s.idsForgottenUntil > s.highWater+int64(maxDedupWindow) {
		return fmt.Errorf("request ids forgotten until %d, beyond the group's time %d and any window", s.idsForgottenUntil, s.highWater)
	}
	for e, m := range s.marks {
		if m.seq > MaxOriginSeq || m.at > s.highWater {
			return fmt.Errorf("origin epoch %#x: mark %d at %d (group time %d)", e, m.seq, m.at, s.highWater)
		}
	}
	return nil
}

// policyOf is the policy client resolves to in the decoded snapshot.
func (s *snapshot) policyOf(client string) bucket.Policy {
	_, p := s.config.Resolve(s.tiers.get(client))
	return p
}

// windowMap is the decoded snapshot's windows (none before format 3).
func (s *snapshot) windowMap() map[string]bucket.Window {
	if len(s.windows) == 0 {
		return nil
	}
	return s.windows[0]
}

// checkRemembered checks remembered decision i, whose predecessor in log
// order was stamped prev.
func checkRemembered(i int, d Decision, prev, highWater int64) error {
	switch {
	case d.Stamp < prev:
		return fmt.Errorf("remembered decisions not in log order at %d", i)
	case d.Stamp > highWater:
		return fmt.Errorf("remembered decision %d made at %d, after the group's time %d", i, d.Stamp, highWater)
	case d.RateKnown && (d.Rate < 0 || d.Rate > bucket.MaxRate):
		return fmt.Errorf("remembered decision %d made at a rate of %d, outside 0..%d", i, d.Rate, int64(bucket.MaxRate))
	}
	return nil
}

// validateOrigins checks the decisions remembered by origin: unique, in log
// order, not after the group's time.
func (s *snapshot) validateOrigins() error {
	seen := make(map[dedupKey]bool, len(s.byOrigin))
	for i, e := range s.byOrigin {
		k := e.key
		switch {
		case k.client == "" || len(k.client) > MaxClientLen:
			return fmt.Errorf("remembered decision %d: client id of %d bytes", i, len(k.client))
		case k.origin == 0 || originSeq(k.origin) == 0:
			return fmt.Errorf("remembered decision %d: origin %#x", i, k.origin)
		case seen[k]:
			return fmt.Errorf("origin %#x of client %q remembered twice", k.origin, k.client)
		}
		if err := checkRemembered(i, e.decision, s.byOrigin[max(i-1, 0)].decision.Stamp, s.highWater); err != nil {
			return err
		}
		seen[k] = true
	}
	return nil
}
