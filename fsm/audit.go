package fsm

// The audit trail (README "Audit"). From ClusterVersionAudit on, the
// entries of operator actions (ConfigOp, SetTier, ResetClient) carry who
// made them and when (Audited), and applying them records it:
//
//   - the group that applies configuration changes (the meta group) keeps
//     the last MaxAuditEntries of them, each with the policy before and
//     after (AuditEntry);
//   - a client's group keeps its last tier assignment and its last reset
//     (ClientRecord). Reclaim forgets buckets, not records: a record goes
//     only once the client has no tier assignment and its newest act is
//     older than RecordRetention, so what an operator did to a client is
//     still there after its bucket was forgotten.
//
// The time of an act is the proposing leader's stamp. It does not move
// the group's time: a change can never refill a bucket, whatever the
// clock of the node that proposed it.

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/internal/binenc"
)

const (
	// Anonymous is the actor of a change made without an API token.
	Anonymous = "anonymous"
	// MaxActorLen bounds an actor's name (an API token's name is at most
	// 64 bytes).
	MaxActorLen = 64
	// MaxAuditEntries is how many configuration changes the audit trail
	// keeps; the oldest are forgotten first.
	MaxAuditEntries = 10_000
	// RecordRetention is how long, in group time, a client's record
	// outlives its tier assignment.
	RecordRetention = int64(30 * 24 * time.Hour)
)

// Act is one operator action on a client: when (the proposing leader's
// time, nanoseconds since the Unix epoch) and by whom. The zero Act is
// none.
type Act struct {
	At int64
	By string
}

// ClientRecord is what a group remembers of the operator actions on one
// client.
type ClientRecord struct {
	// Assigned is the last tier assignment (or removal of one) and
	// AssignedTier what it assigned ("" for a removal).
	Assigned     Act
	AssignedTier string
	// Reset is the last reset.
	Reset Act
}

// AuditEntry is one configuration change in the audit trail.
type AuditEntry struct {
	// Version is the configuration version the change made.
	Version uint64
	Act
	Kind ConfigOpKind
	// Tier is the tier changed; "" for OpSetDefault.
	Tier string
	// Before and After are the policy before and after the change, nil
	// where there was none: a tier created, or deleted. A tier installed
	// with a policy that is not valid (it resolves to the default) shows
	// that policy as it was stored.
	Before, After *bucket.Policy
	// OnRaise is the change's on_raise (bucket.Keep for a deletion).
	OnRaise bucket.OnRaise
}

func (a Audited) validate() error {
	switch {
	case len(a.Actor) > MaxActorLen:
		return fmt.Errorf("actor of %d bytes, at most %d", len(a.Actor), MaxActorLen)
	case a.Stamp < 0:
		return fmt.Errorf("stamp %d before the epoch", a.Stamp)
	}
	return nil
}

// recording reports whether the group records an entry audited as a: one
// with a stamp or an actor, from ClusterVersionAudit on (a snapshot of the
// format before cannot hold the trail).
func (f *FSM) recording(a Audited) bool {
	return a.audited() && f.clusterVersion >= ClusterVersionAudit
}

// act is the Act an audited entry records.
func act(a Audited) Act { return Act{At: a.Stamp, By: cmp.Or(a.Actor, Anonymous)} }

// recordBytes and auditBytes estimate what a client record and an entry
// of the audit trail cost in live heap, like bucketBytes: the map entry or
// slice element, and the strings it holds (a record's are interned, see
// recordMap). Measured by TestStateBytesCountsRecords: 134 bytes a record
// of a 64-byte client id.
func recordBytes(client string) int64 { return 70 + int64(len(client)) }

func auditBytes(e AuditEntry) int64 {
	n := 80 + int64(len(e.By)+len(e.Tier))
	for _, p := range []*bucket.Policy{e.Before, e.After} {
		if p != nil {
			n += 64
		}
	}
	return n
}

// recordChange adds the change o made from old to next to the audit trail.
func (f *FSM) recordChange(o ConfigOp, old, next bucket.Config) {
	e := AuditEntry{Version: next.Version, Act: act(o.Audited), Kind: o.Kind, Tier: o.Tier, OnRaise: o.OnRaise}
	if o.Kind == OpSetDefault {
		e.Before, e.After = &old.Default, &next.Default
	} else {
		if p, ok := old.Tiers[o.Tier]; ok {
			e.Before = &p
		}
		if p, ok := next.Tiers[o.Tier]; ok {
			e.After = &p
		}
	}
	if len(f.audit) == MaxAuditEntries {
		f.mapBytes -= auditBytes(f.audit[0])
		// Dropping from the front and appending at the back never writes
		// an element a snapshot holds: it keeps a prefix of the slice.
		f.audit = f.audit[1:]
	}
	f.audit = append(f.audit, e)
	f.mapBytes += auditBytes(e)
}

// updateRecord applies change to client's record.
func (f *FSM) updateRecord(client string, change func(*ClientRecord)) {
	r, ok := f.records.get(client)
	if ok {
		f.mapBytes -= recordBytes(client)
	}
	change(&r)
	f.records.set(client, r)
	f.mapBytes += recordBytes(client)
	f.recordsFloor = min(f.recordsFloor, r.newestAct())
}

// newestAct is the group time of the record's newest act.
func (r ClientRecord) newestAct() int64 { return max(r.Assigned.At, r.Reset.At) }

// floorRecords recomputes recordsFloor from the records.
func (f *FSM) floorRecords() {
	f.recordsFloor = math.MaxInt64
	f.records.each(func(client string, r ClientRecord) {
		if _, assigned := f.tiers.get(client); !assigned {
			f.recordsFloor = min(f.recordsFloor, r.newestAct())
		}
	})
}

func (f *FSM) recordAssignment(client, tier string, a Act) {
	f.updateRecord(client, func(r *ClientRecord) { r.Assigned, r.AssignedTier = a, tier })
}

func (f *FSM) recordReset(client string, a Act) {
	f.updateRecord(client, func(r *ClientRecord) { r.Reset = a })
}

// pruneRecords forgets the records of clients without a tier assignment
// whose newest act is older than RecordRetention at group time now. Each
// deletion depends only on its own record and assignment, so map order
// cannot change the outcome.
func (f *FSM) pruneRecords(now int64) int {
	f.recordsFloor = math.MaxInt64
	return f.records.deleteIf(func(client string, r ClientRecord) bool {
		if _, assigned := f.tiers.get(client); assigned {
			return false
		}
		old := r.newestAct() < now-RecordRetention
		if old {
			f.mapBytes -= recordBytes(client)
		} else {
			f.recordsFloor = min(f.recordsFloor, r.newestAct())
		}
		return old
	})
}

// AuditPage is a part of the audit trail.
type AuditPage struct {
	// Entries are changes in version order.
	Entries []AuditEntry
	// More reports that the trail holds changes after the last entry.
	More bool
	// Oldest is the version of the oldest change the trail holds (0 if
	// none): when it is above since+1, changes in between were forgotten.
	Oldest uint64
}

// Audit returns the configuration changes this replica's audit trail holds
// after version since, oldest first, at most limit of them (limit > 0).
func (f *FSM) Audit(since uint64, limit int) AuditPage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if len(f.audit) == 0 {
		return AuditPage{}
	}
	i := sort.Search(len(f.audit), func(i int) bool { return f.audit[i].Version > since })
	j := i + min(len(f.audit)-i, max(limit, 0))
	return AuditPage{Entries: append([]AuditEntry(nil), f.audit[i:j]...), More: j < len(f.audit), Oldest: f.audit[0].Version}
}

// Record returns what this replica remembers of the operator actions on
// client.
func (f *FSM) Record(client string) (ClientRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.records.get(client)
}

// appendAudit writes the audit trail (at most MaxAuditEntries entries),
// for a snapshot of format 3.
func (s *snapshot) appendAudit(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s.audit)))
	for _, e := range s.audit {
		b = binary.AppendUvarint(b, e.Version)
		b = appendAct(b, e.Act)
		b = append(b, byte(e.Kind), byte(e.OnRaise))
		b = binenc.AppendString(b, e.Tier)
		for _, p := range []*bucket.Policy{e.Before, e.After} {
			b = binenc.AppendBool(b, p != nil)
			if p != nil {
				b = appendPolicyV2(b, *p)
			}
		}
	}
	return b
}

// appendRecord writes one client record, for a snapshot of format 3.
func appendRecord(b []byte, client string, r ClientRecord) []byte {
	b = binenc.AppendString(b, client)
	b = appendAct(b, r.Assigned)
	b = binenc.AppendString(b, r.AssignedTier)
	return appendAct(b, r.Reset)
}

func appendAct(b []byte, a Act) []byte {
	return binenc.AppendString(binary.AppendVarint(b, a.At), a.By)
}

func (r *reader) act() Act { return Act{At: r.Varint(), By: r.Str(MaxActorLen)} }

// readAudit reads what appendAudit wrote into s.
func (r *reader) readAudit(s *snapshot) {
	n := r.Count(6)
	if r.Err == nil && n > MaxAuditEntries {
		r.Fail("%d audit entries, at most %d", n, MaxAuditEntries)
	}
	s.audit = make([]AuditEntry, 0, n)
	for i := uint64(0); i < n && r.Err == nil; i++ {
		e := AuditEntry{Version: r.Uvarint(), Act: r.act()}
		e.Kind, e.OnRaise = ConfigOpKind(r.Byte()), bucket.OnRaise(r.Byte())
		e.Tier = r.Str(bucket.MaxTierNameLen)
		for _, p := range []**bucket.Policy{&e.Before, &e.After} {
			if r.Bool() {
				pol := r.policyV2()
				*p = &pol
			}
		}
		s.audit = append(s.audit, e)
	}
	n = r.Count(4)
	records := make(map[string]ClientRecord, n)
	for i := uint64(0); i < n && r.Err == nil; i++ {
		c := r.Str(MaxClientLen)
		rec := ClientRecord{Assigned: r.act(), AssignedTier: r.Str(bucket.MaxTierNameLen), Reset: r.act()}
		if _, dup := records[c]; dup {
			r.Fail("record of %q twice", c)
		}
		records[c] = rec
	}
	s.records = frozenRecordsOf(records)
}

// validateAudit checks a decoded snapshot's audit trail and records.
func (s *snapshot) validateAudit() error {
	for i, e := range s.audit {
		op := ConfigOp{Kind: e.Kind, Tier: e.Tier, OnRaise: e.OnRaise, Audited: Audited{Stamp: e.At, Actor: e.By}}
		switch {
		case Validate(op) != nil || e.OnRaise > bucket.Fill || e.By == "":
			return fmt.Errorf("audit entry %d: invalid", i)
		case e.Version == 0 || e.Version > s.config.Version || i > 0 && e.Version <= s.audit[i-1].Version:
			return fmt.Errorf("audit entry %d: version %d out of order (configuration version %d)", i, e.Version, s.config.Version)
		case e.Kind == OpSetDefault && (e.Before == nil || e.After == nil):
			return fmt.Errorf("audit entry %d: a default change without a policy before or after", i)
		}
	}
	var bad error
	s.records.each(func(client string, r ClientRecord) {
		if bad != nil {
			return
		}
		if err := Validate(SetTier{Client: client, Tier: r.AssignedTier}); err != nil {
			bad = fmt.Errorf("record of %q: %v", client, err)
		}
		for _, a := range []Act{r.Assigned, r.Reset} {
			if a.At < 0 || (a != Act{} && a.By == "") {
				bad = fmt.Errorf("record of %q: an act at %d by %q", client, a.At, a.By)
			}
		}
	})
	return bad
}
