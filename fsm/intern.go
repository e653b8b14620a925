package fsm

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"
)

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
		maps.Copy(m, t.byName)
		t.byName, t.peak = m, len(m)
	}
}

// frozenInterned is what a snapshot holds of a map whose values keep ids
// of interned strings (tierMap, recordMap): the frozen compact values, the
// strings their ids stood for as the snapshot was taken, and how to turn
// one back into its full value.
type frozenInterned[C, V any] struct {
	m      frozenMap[C]
	names  []string
	expand func(C, []string) V
}

func (f frozenInterned[C, V]) len() int { return f.m.len() }

// each calls fn for every entry, in no particular order.
func (f frozenInterned[C, V]) each(fn func(client string, v V)) {
	for _, part := range f.m {
		for client, c := range part {
			fn(client, f.expand(c, f.names))
		}
	}
}

// sorted returns every entry in client order.
func (f frozenInterned[C, V]) sorted() []entry[V] {
	out := make([]entry[V], 0, f.len())
	f.each(func(client string, v V) { out = append(out, entry[V]{client, v}) })
	slices.SortFunc(out, func(a, b entry[V]) int { return strings.Compare(a.k, b.k) })
	return out
}

// get returns client's value (the zero value if none).
func (f frozenInterned[C, V]) get(client string) V {
	part := f.m[0] // a decoded snapshot's one part
	if len(f.m) == cowShards {
		part = f.m[maphash.String(cowSeed, client)%cowShards]
	}
	c, ok := part[client]
	if !ok {
		var zero V
		return zero
	}
	return f.expand(c, f.names)
}
