package fsm

import "time"

// Dedup defaults: a request id is remembered for two minutes of group time,
// and at most 262144 ids per group are remembered at once.
const (
	DefaultDedupWindow = int64(2 * time.Minute)
	DefaultDedupMax    = 1 << 18
)

// dedupKey is a request id scoped to its client, so two clients may reuse
// each other's ids.
type dedupKey struct {
	client, id string
}

type dedupEntry struct {
	key      dedupKey
	decision Decision
}

// dedupWindow remembers recent decisions by request id, in log order, and
// forgets them oldest first by group time and by count. Everything it does
// depends only on the order of puts and the stamps in them, so replicas
// agree on which ids are remembered.
type dedupWindow struct {
	window int64
	max    int
	byKey  map[dedupKey]int // position in order, offset by head
	order  []dedupEntry     // oldest first; order[0] has position head
	head   int
}

func newDedupWindow(window int64, max int) *dedupWindow {
	if window <= 0 {
		window = DefaultDedupWindow
	}
	if max <= 0 {
		max = DefaultDedupMax
	}
	return &dedupWindow{window: window, max: max, byKey: map[dedupKey]int{}}
}

func (d *dedupWindow) len() int { return len(d.order) }

func (d *dedupWindow) get(client, id string) (Decision, bool) {
	pos, ok := d.byKey[dedupKey{client, id}]
	if !ok {
		return Decision{}, false
	}
	return d.order[pos-d.head].decision, true
}

// put remembers dec under (client, id) and returns how many older ids it
// forgot to stay within max: ids forgotten before their window ended.
func (d *dedupWindow) put(client, id string, dec Decision) (evicted int) {
	k := dedupKey{client, id}
	d.byKey[k] = d.head + len(d.order)
	d.order = append(d.order, dedupEntry{key: k, decision: dec})
	if len(d.order) > d.max {
		evicted = len(d.order) - d.max
		d.dropFront(evicted)
	}
	return evicted
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

func (d *dedupWindow) dropFront(n int) {
	if n == 0 {
		return
	}
	for _, e := range d.order[:n] {
		delete(d.byKey, e.key)
	}
	clear(d.order[:n])
	d.order = d.order[n:]
	d.head += n
}
