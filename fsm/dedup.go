package fsm

import "time"

// Dedup defaults. A request id is remembered for two minutes of group time.
// Below ClusterVersionIDMemory a group holds at most 262144 ids at once and
// forgets the oldest early to take more; from it on, it holds up to
// DefaultRequestIDMax (2 minutes of 559,240 new ids a second, 4 GiB at 64
// bytes an id) and sheds new ids past that. A request without an id is
// remembered under its origin (see AllowRequest) for ten seconds, at most
// 65536 per group: only its own node asks for it, and only while its caller
// waits.
const (
	DefaultDedupWindow       = int64(2 * time.Minute)
	DefaultDedupMax          = 1 << 18
	DefaultRequestIDMax      = 1 << 26
	DefaultOriginDedupWindow = int64(10 * time.Second)
	DefaultOriginDedupMax    = 1 << 16
)

// maxDedupWindow bounds Options.DedupWindow; restored snapshots are checked
// against it.
const maxDedupWindow = 24 * time.Hour

// originMarkLife is how long, in group time, a group keeps the highest
// forgotten sequence number of an epoch after it last rose. A node retries
// a request only for a few seconds after proposing it (cluster bounds it far
// below this), so by then no retry can need the mark.
const originMarkLife = int64(5 * time.Minute)

// dedupKey names a remembered decision: a request id scoped to its client
// (so two clients may reuse each other's ids, origin 0), or, for a request
// without an id, the request's origin (id "").
type dedupKey struct {
	client, id string
	origin     uint64
}

type dedupEntry struct {
	key      dedupKey
	decision Decision // decision.Origin is the origin of the request that made it
}

// dedupWindow remembers recent decisions, in log order, and forgets them
// oldest first by group time and by count, telling forgot about each.
// Everything it does depends only on the order of puts and the stamps in
// them, so replicas agree on which decisions are remembered.
type dedupWindow struct {
	window int64
	max    int
	forgot func(dedupEntry) // may be nil
	byKey  map[dedupKey]int // position in order, offset by head
	order  []dedupEntry     // oldest first; order[0] has position head
	head   int
	bytes  int64 // what the remembered entries cost (see entryBytes)
	peak   int   // the most entries held since byKey and order were built (see shrink)
}

// entryBytes estimates what remembering one decision costs in live heap:
// the entry, its place in the map and its request id (the client id's bytes
// are the bucket's). Measured by BenchmarkStateBytes: 226 bytes with a
// 16-byte id, 338 with a 128-byte one.
func entryBytes(k dedupKey) int64 { return 210 + int64(len(k.id)) }

func newDedupWindow(window int64, max int, forgot func(dedupEntry)) *dedupWindow {
	return &dedupWindow{window: window, max: max, forgot: forgot, byKey: map[dedupKey]int{}}
}

func (d *dedupWindow) len() int { return len(d.order) }

func (d *dedupWindow) get(k dedupKey) (Decision, bool) {
	pos, ok := d.byKey[k]
	if !ok {
		return Decision{}, false
	}
	return d.order[pos-d.head].decision, true
}

// put remembers dec under k. It returns how many older entries it forgot
// to stay within max (entries forgotten before their window ended) and the
// stamp of the newest of them.
func (d *dedupWindow) put(k dedupKey, dec Decision) (evicted int, newest int64) {
	d.byKey[k] = d.head + len(d.order)
	d.order = append(d.order, dedupEntry{key: k, decision: dec})
	d.bytes += entryBytes(k)
	d.peak = max(d.peak, len(d.byKey))
	if len(d.order) > d.max {
		evicted = len(d.order) - d.max
		newest = d.order[evicted-1].decision.Stamp // oldest first
		d.dropFront(evicted)
	}
	return evicted, newest
}

// expire forgets entries older than the window at group time now and
// returns how many it forgot.
func (d *dedupWindow) expire(now int64) int {
	n := 0
	for n < len(d.order) && d.order[n].decision.Stamp < now-d.window {
		n++
	}
	d.dropFront(n)
	return n
}

// expired reports whether expire(now) would forget anything.
func (d *dedupWindow) expired(now int64) bool {
	return len(d.order) > 0 && d.order[0].decision.Stamp < now-d.window
}

func (d *dedupWindow) dropFront(n int) {
	if n == 0 {
		return
	}
	for _, e := range d.order[:n] {
		delete(d.byKey, e.key)
		d.bytes -= entryBytes(e.key)
		if d.forgot != nil {
			d.forgot(e)
		}
	}
	// The dropped entries are not cleared: a snapshot may still be encoding
	// them (see FSM.Snapshot). They go when append next moves the array,
	// or when shrink does.
	d.order = d.order[n:]
	d.head += n
	d.shrink()
}

// shrink rebuilds the map and the array at their size once they hold a
// quarter of their peak or less: Go maps never give memory back, and the
// array keeps every dropped entry (and its strings) until it moves. Positions
// are relative to head, so they stay valid.
// (byKey and order always hold the same entries, so one peak serves both.)
func (d *dedupWindow) shrink() {
	if d.peak < shrinkMin || len(d.order) > d.peak/4 {
		return
	}
	m := make(map[dedupKey]int, len(d.byKey))
	for k, v := range d.byKey {
		m[k] = v
	}
	d.byKey = m
	d.order = append(make([]dedupEntry, 0, 2*len(d.order)), d.order...)
	d.peak = len(d.order)
}

// originMark is what a group keeps of an epoch whose requests it forgot:
// the highest sequence number forgotten, and the group time it rose at.
type originMark struct {
	seq uint64
	at  int64
}

// past reports whether no retry can need m any more at group time now
// (see originMarkLife).
func (m originMark) past(now int64) bool { return m.at < now-originMarkLife }

// forget records that the decision of origin o was forgotten at group time
// now.
func (f *FSM) forget(o uint64, now int64) {
	if o == 0 {
		return
	}
	e := originEpoch(o)
	m := f.marks[e]
	f.marks[e] = originMark{seq: max(m.seq, originSeq(o)), at: now}
}

// mayHaveForgotten reports whether the group could have applied a request
// of origin o and forgotten it since: only then is a retry of o that finds
// no remembered decision unresolved rather than new.
func (f *FSM) mayHaveForgotten(o uint64) bool {
	m, ok := f.marks[originEpoch(o)]
	return ok && originSeq(o) <= m.seq
}

// marksExpired reports whether pruneMarks(now) would drop a mark.
func (f *FSM) marksExpired(now int64) bool {
	for _, m := range f.marks {
		if m.past(now) {
			return true
		}
	}
	return false
}

// pruneMarks drops marks that no retry can need any more (see
// originMarkLife). Each deletion depends only on its own mark, so map order
// cannot change the outcome.
func (f *FSM) pruneMarks(now int64) {
	for e, m := range f.marks {
		if m.past(now) {
			delete(f.marks, e)
		}
	}
}
