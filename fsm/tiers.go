package fsm

import (
	"hash/maphash"
	"slices"
	"strings"
)

// tierMap holds the clients' tier assignments. A million clients are
// assigned to a handful of tiers, so each client holds a 4-byte id of an
// interned name rather than a string of its own: 56 bytes an assignment
// instead of 116 at a million clients (BenchmarkMillionClients). A name is
// kept while a client is assigned to it; one assigned to a name no other
// client has pays for the name as well, as it did before.
type tierMap struct {
	ids   *cowMap[uint32]
	names internTable
}

func newTierMap() *tierMap {
	return &tierMap{ids: newCowMap[uint32](), names: newInternTable()}
}

func (m *tierMap) len() int { return m.ids.len() }

func (m *tierMap) get(client string) (string, bool) {
	id, ok := m.ids.get(client)
	if !ok {
		return "", false
	}
	return m.names.names[id], true
}

func (m *tierMap) set(client, tier string) {
	old, had := m.ids.get(client)
	if had && m.names.names[old] == tier {
		return
	}
	m.ids.set(client, m.names.acquire(tier))
	if had {
		m.names.release(old)
	}
}

func (m *tierMap) delete(client string) {
	if old, ok := m.ids.get(client); ok {
		m.ids.delete(client)
		m.names.release(old)
	}
}

// freeze hands h the assignments as they are now (see cowMap.freeze), with
// a copy of the names their ids stand for: an id freed later may name
// another tier, but not in the snapshot. The copy is one string header per
// name in use.
func (m *tierMap) freeze(h *snapshotHold) frozenTiers {
	return frozenTiers{ids: m.ids.freeze(h), names: slices.Clone(m.names.names)}
}

// internTable interns the strings a map of clients holds many copies of
// (tier names, actors), counting the uses of each. Ids are handed out in
// apply order, so replicas agree on them, though nothing outside the
// table's map ever sees one.
type internTable struct {
	byName map[string]uint32
	names  []string // by id; "" for a free id
	refs   []uint32 // by id
	free   []uint32
	peak   int // the most names held since byName was built
}

func newInternTable() internTable { return internTable{byName: map[string]uint32{}} }

func (t *internTable) acquire(name string) uint32 {
	if id, ok := t.byName[name]; ok {
		t.refs[id]++
		return id
	}
	var id uint32
	if n := len(t.free); n > 0 {
		id, t.free = t.free[n-1], t.free[:n-1]
		t.names[id], t.refs[id] = name, 1
	} else {
		id = uint32(len(t.names))
		t.names, t.refs = append(t.names, name), append(t.refs, 1)
	}
	t.byName[name] = id
	t.peak = max(t.peak, len(t.byName))
	return id
}

func (t *internTable) release(id uint32) {
	if t.refs[id]--; t.refs[id] > 0 {
		return
	}
	delete(t.byName, t.names[id])
	t.names[id] = ""
	t.free = append(t.free, id)
	// Go maps never give memory back: rebuild the index once it holds a
	// quarter of its peak (ids stay as they are).
	if t.peak >= shrinkMin && len(t.byName) <= t.peak/4 {
		m := make(map[string]uint32, len(t.byName))
		for k, v := range t.byName {
			m[k] = v
		}
		t.byName, t.peak = m, len(m)
	}
}

// frozenTiers is the tier assignments a snapshot holds: ids by client, and
// the names of the ids as the snapshot was taken.
type frozenTiers struct {
	ids   frozenMap[uint32]
	names []string
}

// frozenTiersOf builds the frozenTiers of a decoded snapshot, in one part.
func frozenTiersOf(m map[string]string) frozenTiers {
	names := newInternTable()
	ids := make(map[string]uint32, len(m))
	for client, tier := range m {
		ids[client] = names.acquire(tier)
	}
	return frozenTiers{ids: frozenMap[uint32]{ids}, names: names.names}
}

func (t frozenTiers) len() int { return t.ids.len() }

// each calls fn for every assignment, in no particular order.
func (t frozenTiers) each(fn func(client, tier string)) {
	for _, m := range t.ids {
		for client, id := range m {
			fn(client, t.names[id])
		}
	}
}

// sorted returns every assignment in client order.
func (t frozenTiers) sorted() []entry[string] {
	out := make([]entry[string], 0, t.len())
	t.each(func(client, tier string) { out = append(out, entry[string]{client, tier}) })
	slices.SortFunc(out, func(a, b entry[string]) int { return strings.Compare(a.k, b.k) })
	return out
}

// get returns client's tier ("" if none).
func (t frozenTiers) get(client string) string {
	part := t.ids[0] // a decoded snapshot's one part
	if len(t.ids) == cowShards {
		part = t.ids[maphash.String(cowSeed, client)%cowShards]
	}
	if id, ok := part[client]; ok {
		return t.names[id]
	}
	return ""
}
