package fsm

import "slices"

// recordMap holds the clients' records (ClientRecord) compactly: the
// strings of a record (who acted, the tier assigned) are few across a
// million clients, so a record holds ids of interned strings, 32 bytes
// instead of 64 and three strings of its own.
type recordMap struct {
	m     *cowMap[compactRecord]
	names internTable
}

// compactRecord is a ClientRecord with its strings interned.
type compactRecord struct {
	assignedAt, resetAt       int64
	assignedBy, tier, resetBy uint32
}

func newRecordMap() *recordMap {
	return &recordMap{m: newCowMap[compactRecord](), names: newInternTable()}
}

func (m *recordMap) len() int { return m.m.len() }

func (m *recordMap) get(client string) (ClientRecord, bool) {
	c, ok := m.m.get(client)
	if !ok {
		return ClientRecord{}, false
	}
	return expandRecord(c, m.names.names), true
}

func expandRecord(c compactRecord, names []string) ClientRecord {
	return ClientRecord{
		Assigned:     Act{At: c.assignedAt, By: names[c.assignedBy]},
		AssignedTier: names[c.tier],
		Reset:        Act{At: c.resetAt, By: names[c.resetBy]},
	}
}

// set stores r as client's record. The new strings are taken before the
// old ones are let go, so that a string in both keeps its id.
func (m *recordMap) set(client string, r ClientRecord) {
	c := m.names.compact(r)
	if old, ok := m.m.get(client); ok {
		m.release(old)
	}
	m.m.set(client, c)
}

// compact interns r's strings.
func (t *internTable) compact(r ClientRecord) compactRecord {
	return compactRecord{
		assignedAt: r.Assigned.At, resetAt: r.Reset.At,
		assignedBy: t.acquire(r.Assigned.By), tier: t.acquire(r.AssignedTier), resetBy: t.acquire(r.Reset.By),
	}
}

func (m *recordMap) release(c compactRecord) {
	m.names.release(c.assignedBy)
	m.names.release(c.tier)
	m.names.release(c.resetBy)
}

// each calls fn for every record, in no particular order.
func (m *recordMap) each(fn func(client string, r ClientRecord)) {
	m.m.each(func(client string, c compactRecord) { fn(client, expandRecord(c, m.names.names)) })
}

// deleteIf deletes every record for which drop returns true.
func (m *recordMap) deleteIf(drop func(client string, r ClientRecord) bool) int {
	return m.m.deleteIf(func(client string, c compactRecord) bool {
		if !drop(client, expandRecord(c, m.names.names)) {
			return false
		}
		m.release(c)
		return true
	})
}

// freeze hands h the records as they are now, with a copy of the strings
// their ids stand for (see tierMap.freeze).
func (m *recordMap) freeze(h *snapshotHold) frozenRecords {
	return frozenRecords{m: m.m.freeze(h), names: slices.Clone(m.names.names), expand: expandRecord}
}

// frozenRecords is the records a snapshot holds.
type frozenRecords = frozenInterned[compactRecord, ClientRecord]

// frozenRecordsOf builds the frozenRecords of a decoded snapshot, in one
// part.
func frozenRecordsOf(records map[string]ClientRecord) frozenRecords {
	names := newInternTable()
	one := make(map[string]compactRecord, len(records))
	for client, r := range records {
		one[client] = names.compact(r)
	}
	return frozenRecords{m: frozenMap[compactRecord]{one}, names: names.names, expand: expandRecord}
}
