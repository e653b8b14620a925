package bucket

// Window is one client's sliding-window state: the admissions that may
// still count, oldest first, and their total cost.
//
// A Window is a value that shares its array: DecideWindow only appends
// beyond the slice it was given or re-slices from the front, and copies to
// a new array when it compacts, so a Window kept elsewhere (a snapshot
// being written) never sees a later decision. The zero Window is empty: a
// client with no window behaves exactly like one whose window is empty.
type Window struct {
	Log  []Admission
	Used int64 // the sum of Log's costs
}

// Admission is cost admitted at group time At (nanoseconds since the epoch).
type Admission struct {
	At   int64
	Cost int64
}

// WindowBytes estimates what a window's log costs in heap beyond the
// window itself: 16 bytes per admission it has room for.
func WindowBytes(w Window) int64 { return 16 * int64(cap(w.Log)) }

// Expire returns w without the admissions that left p's window by now: an
// admission at time a counts against a decision at t exactly when
// t - a < p.Window, so at most p.Capacity is admitted in any half-open
// interval of length p.Window.
func Expire(p Policy, w Window, now int64) Window {
	i := 0
	for i < len(w.Log) && now-w.Log[i].At >= p.Window {
		w.Used -= w.Log[i].Cost
		i++
	}
	if i == 0 {
		return w
	}
	w.Log = w.Log[i:]
	if len(w.Log) == 0 {
		return Window{}
	}
	if c := cap(w.Log); c >= 64 && len(w.Log) <= c/4 {
		// Compact into a new array: the old one may be shared.
		w.Log = append(make([]Admission, 0, 2*len(w.Log)), w.Log...)
	}
	return w
}

// DecideWindow admits cost at time now under the sliding window p if the
// cost admitted in the window ending at now leaves room for it, and returns
// the new state and the decision. A cost of 0 peeks. Time before the
// newest admission counts as that time. cost must be in 0..MaxCost; p must
// be a valid SlidingWindow policy.
func DecideWindow(p Policy, w Window, now int64, cost int64) (Window, Decision) {
	now = windowNow(w, now)
	w = Expire(p, w, now)
	allowed := w.Used+cost <= p.Capacity
	if allowed && cost > 0 {
		w.Log = append(w.Log, Admission{At: now, Cost: cost})
		w.Used += cost
	}
	d := windowDecision(p, w, now, cost)
	d.Allowed = allowed
	if allowed {
		d.RetryAfter = 0
	}
	return w, d
}

// PeekWindow returns the decision a request of cost would get at now,
// without admitting anything.
func PeekWindow(p Policy, w Window, now int64, cost int64) Decision {
	now = windowNow(w, now)
	w = Expire(p, w, now)
	d := windowDecision(p, w, now, cost)
	d.Allowed = w.Used+cost <= p.Capacity
	return d
}

// windowNow is now, or the time of w's newest admission if that is later:
// time before it counts as that time.
func windowNow(w Window, now int64) int64 {
	if n := len(w.Log); n > 0 {
		return max(now, w.Log[n-1].At)
	}
	return now
}

// windowDecision fills in what w shows at now for a request of cost:
// remaining room, when the request fits and when the window is empty.
func windowDecision(p Policy, w Window, now int64, cost int64) Decision {
	d := Decision{Limit: p.Capacity, Remaining: max(0, p.Capacity-w.Used) * Scale}
	switch {
	case cost > p.Capacity:
		d.RetryAfter = Never
	case w.Used+cost <= p.Capacity:
		d.RetryAfter = 0
	default:
		// The request fits once enough of the oldest admissions expire.
		left := w.Used
		for _, a := range w.Log {
			left -= a.Cost
			if left+cost <= p.Capacity {
				d.RetryAfter = a.At + p.Window - now
				break
			}
		}
	}
	if n := len(w.Log); n > 0 {
		d.ResetAfter = w.Log[n-1].At + p.Window - now
	}
	return d
}

// WindowEmpty reports whether w holds nothing that counts at now under p:
// such a window behaves exactly like none, so it may be forgotten.
func WindowEmpty(p Policy, w Window, now int64) bool {
	return len(w.Log) == 0 || now-w.Log[len(w.Log)-1].At >= p.Window
}

// BucketToWindow converts a client's token bucket under policy from to a
// window under the sliding window to, at time now: the client keeps what
// it had left (whole tokens, rounded down), never more than to's limit; the
// rest counts as admitted at now.
func BucketToWindow(from Policy, s State, to Policy, now int64) Window {
	left := Refill(from, s, now).Tokens / Scale
	used := to.Capacity - min(left, to.Capacity)
	if used <= 0 {
		return Window{}
	}
	return Window{Log: []Admission{{At: now, Cost: used}}, Used: used}
}

// WindowToBucket converts a client's window under the sliding window from
// to a token bucket under to, at time now: the bucket holds what the
// window had left, never more than to's capacity.
func WindowToBucket(from Policy, w Window, to Policy, now int64) State {
	w = Expire(from, w, now)
	left := max(0, from.Capacity-w.Used)
	return State{Tokens: min(left, to.Capacity) * Scale, Last: now}
}
