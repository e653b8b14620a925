package fsm

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
)

// cowShards is how many parts a cowMap is cut into: a write after a
// snapshot copies one part, about 1/256 of the map.
const cowShards = 256

// cowMap is a map from client ids that a snapshot can take in constant time
// and encode while applies go on: taking one freezes every part, and the
// first write to a frozen part copies that part first (copy on write, one
// part at a time). Like the FSM's other state, it is used under the FSM's
// lock; frozen parts are read by the snapshot's Persist without it, and are
// never written again.
type cowMap[V any] struct {
	parts [cowShards]cowPart[V]
	n     int
}

type cowPart[V any] struct {
	m map[string]V
	// holds are the snapshots that took m; while one is not released, m
	// must not change.
	holds []*snapshotHold
	// peak is the most entries m held since it was built: Go maps never
	// give back memory, so a part that fell to a quarter of its peak is
	// rebuilt at its size (see shrink).
	peak int
}

// shrinkMin is the smallest peak worth rebuilding a part or window for.
const shrinkMin = 256

// snapshotHold marks the parts one snapshot holds until it is released.
type snapshotHold struct{ released atomic.Bool }

var cowSeed = maphash.MakeSeed()

func newCowMap[V any]() *cowMap[V] {
	c := &cowMap[V]{}
	for i := range c.parts {
		c.parts[i].m = map[string]V{}
	}
	return c
}

func cowMapOf[V any](m map[string]V) *cowMap[V] {
	c := newCowMap[V]()
	for k, v := range m {
		c.set(k, v)
	}
	return c
}

func (c *cowMap[V]) part(k string) *cowPart[V] {
	return &c.parts[maphash.String(cowSeed, k)%cowShards]
}

func (c *cowMap[V]) len() int { return c.n }

func (c *cowMap[V]) get(k string) (V, bool) {
	v, ok := c.part(k).m[k]
	return v, ok
}

// writable returns p's map, copying it first if a live snapshot holds it.
func (p *cowPart[V]) writable() map[string]V {
	if len(p.holds) > 0 {
		if slices.ContainsFunc(p.holds, (*snapshotHold).live) {
			p.m = maps.Clone(p.m)
		}
		p.holds = nil
	}
	return p.m
}

func (h *snapshotHold) live() bool { return !h.released.Load() }

func (c *cowMap[V]) set(k string, v V) {
	p := c.part(k)
	if _, ok := p.m[k]; !ok {
		c.n++
	}
	p.writable()[k] = v
	p.peak = max(p.peak, len(p.m))
}

func (c *cowMap[V]) delete(k string) {
	p := c.part(k)
	if _, ok := p.m[k]; ok {
		delete(p.writable(), k)
		c.n--
		p.shrink()
	}
}

// shrink rebuilds p's map at its size once it holds a quarter of its peak
// or less, so that memory follows the state. A snapshot holding the old map
// keeps it; the new one is p's alone.
func (p *cowPart[V]) shrink() {
	if p.peak < shrinkMin || len(p.m) > p.peak/4 {
		return
	}
	m := make(map[string]V, len(p.m))
	maps.Copy(m, p.m)
	p.m, p.holds, p.peak = m, nil, len(m)
}

// keys returns every key, in no particular order.
func (c *cowMap[V]) keys() []string {
	out := make([]string, 0, c.n)
	for i := range c.parts {
		for k := range c.parts[i].m {
			out = append(out, k)
		}
	}
	return out
}

// each calls fn for every entry, in no particular order.
func (c *cowMap[V]) each(fn func(k string, v V)) {
	for i := range c.parts {
		for k, v := range c.parts[i].m {
			fn(k, v)
		}
	}
}

// deleteIf deletes every entry for which drop returns true.
func (c *cowMap[V]) deleteIf(drop func(k string, v V) bool) int {
	n := 0
	for i := range c.parts {
		p := &c.parts[i]
		var gone []string
		for k, v := range p.m {
			if drop(k, v) {
				gone = append(gone, k)
			}
		}
		for _, k := range gone {
			delete(p.writable(), k)
		}
		n += len(gone)
		if len(gone) > 0 {
			p.shrink()
		}
	}
	c.n -= n
	return n
}

// freeze hands h every part as it is now; writes from here on copy a part
// before changing it, until h is released.
func (c *cowMap[V]) freeze(h *snapshotHold) frozenMap[V] {
	f := make(frozenMap[V], cowShards)
	for i := range c.parts {
		p := &c.parts[i]
		p.holds = append(slices.DeleteFunc(p.holds, func(h *snapshotHold) bool { return !h.live() }), h)
		f[i] = p.m
	}
	return f
}

// frozenMap is a cowMap's parts as a snapshot took them.
type frozenMap[V any] []map[string]V

func (f frozenMap[V]) len() int {
	n := 0
	for _, m := range f {
		n += len(m)
	}
	return n
}

// entry is one key and its value.
type entry[V any] struct {
	k string
	v V
}

// sorted returns every entry in key order, so that snapshot bytes depend
// only on the content.
func (f frozenMap[V]) sorted() []entry[V] {
	out := make([]entry[V], 0, f.len())
	for _, m := range f {
		for k, v := range m {
			out = append(out, entry[V]{k, v})
		}
	}
	slices.SortFunc(out, func(a, b entry[V]) int { return strings.Compare(a.k, b.k) })
	return out
}
