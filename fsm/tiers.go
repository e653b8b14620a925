package fsm

import "slices"

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
	return frozenTiers{m: m.ids.freeze(h), names: slices.Clone(m.names.names), expand: tierName}
}

// frozenTiers is the tier assignments a snapshot holds.
type frozenTiers = frozenInterned[uint32, string]

func tierName(id uint32, names []string) string { return names[id] }

// frozenTiersOf builds the frozenTiers of a decoded snapshot, in one part.
func frozenTiersOf(m map[string]string) frozenTiers {
	names := newInternTable()
	ids := make(map[string]uint32, len(m))
	for client, tier := range m {
		ids[client] = names.acquire(tier)
	}
	return frozenTiers{m: frozenMap[uint32]{ids}, names: names.names, expand: tierName}
}
