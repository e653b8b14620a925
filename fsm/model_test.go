package fsm_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

var modelSeed = flag.Uint64("model.seed", 0, "seed of TestModel's random driver (0: from the clock)")

// The reference model: README.md's Semantics section written as directly
// as possible, with exact rational balances and no code from package bucket
// beyond its types and limits.

// modelBucket is one client's balance in tokens, as of last.
type modelBucket struct {
	tokens *big.Rat
	last   int64
}

// modelAdmission is cost a sliding window admitted at a time.
type modelAdmission struct{ at, cost int64 }

type modelSeen struct {
	decision fsm.Decision
	seq      int // position among all remembered decisions, from 1
}

type dedupKey struct{ client, id string }

type model struct {
	now     int64 // group time: the largest stamp so far
	version uint64
	def     bucket.Policy
	tiers   map[string]bucket.Policy
	assign  map[string]string
	buckets map[string]*modelBucket
	windows map[string][]modelAdmission // clients under sliding windows

	window int64
	max    int
	seen   map[dedupKey]modelSeen
	puts   int
	fills  int // changes that filled a tier

	// The audit trail: the configuration changes, oldest first, and per
	// client its last assignment and reset.
	audit   []fsm.AuditEntry
	records map[string]fsm.ClientRecord
	pruned  int // records forgotten
}

// Tier names the driver uses. The model knows which are invalid by this list,
// not by asking package bucket.
var (
	modelTierNames    = []string{"free", "pro", "enterprise", "gold", "broken"}
	modelInvalidNames = []string{"default", "Free", "", "two words"}
	modelAssignNames  = []string{"free", "pro", "enterprise", "gold", "broken", "missing", "default", ""}
)

func newModel(def bucket.Policy, window int64, maxIDs int) *model {
	return &model{
		def: def, tiers: map[string]bucket.Policy{}, assign: map[string]string{},
		buckets: map[string]*modelBucket{}, windows: map[string][]modelAdmission{}, window: window, max: maxIDs, seen: map[dedupKey]modelSeen{},
		records: map[string]fsm.ClientRecord{},
	}
}

func modelValid(p bucket.Policy) bool {
	if p.Mode > 1 || p.WhenUnavailable > 1 {
		return false
	}
	switch p.Algorithm {
	case bucket.TokenBucket:
		return p.Capacity >= 1 && p.Capacity <= 1_000_000_000 && p.Rate >= 0 && p.Rate <= 1_000_000_000*1_000_000_000 && p.Window == 0
	case bucket.SlidingWindow:
		const second = 1_000_000_000
		return p.Capacity >= 1 && p.Capacity <= 10_000 && p.Rate == 0 && p.Window >= second && p.Window <= 86_400*second && p.Window%second == 0
	}
	return false
}

// used is the cost client's window admitted less than p's window before
// now: what counts against its next decision.
func (m *model) used(client string, p bucket.Policy) int64 {
	var u int64
	for _, a := range m.windows[client] {
		if m.now-a.at < p.Window {
			u += a.cost
		}
	}
	return u
}

// forget drops client's state: full bucket, empty window.
func (m *model) forget(client string) (had bool) {
	_, b := m.buckets[client]
	_, w := m.windows[client]
	delete(m.buckets, client)
	delete(m.windows, client)
	return b || w
}

// known reports whether the model holds state for client.
func (m *model) known(client string) bool {
	_, b := m.buckets[client]
	_, w := m.windows[client]
	return b || w
}

// changePolicies moves every client with state from the policies of
// before to those in force now: a client whose tier was filled by the
// change forgets its state; one whose policy changed algorithm keeps what
// it had left (whole tokens), at most the new policy's capacity.
func (m *model) changePolicies(before func(string) (string, bucket.Policy), filled map[string]bool) {
	clients := map[string]bool{}
	for c := range m.buckets {
		clients[c] = true
	}
	for c := range m.windows {
		clients[c] = true
	}
	for c := range clients {
		_, from := before(c)
		name, to := m.resolve(c)
		if filled[name] {
			m.forget(c)
			continue
		}
		m.convert(c, from, to)
	}
}

func (m *model) convert(c string, from, to bucket.Policy) {
	switch {
	case from.Algorithm == to.Algorithm:
	case to.Algorithm == bucket.SlidingWindow:
		if _, ok := m.buckets[c]; !ok {
			return
		}
		left := floorNano(m.balance(c, from)) / 1_000_000_000
		delete(m.buckets, c)
		if used := to.Capacity - min(left, to.Capacity); used > 0 {
			m.windows[c] = []modelAdmission{{m.now, used}}
		}
	default:
		if _, ok := m.windows[c]; !ok {
			return
		}
		left := max(0, from.Capacity-m.used(c, from))
		delete(m.windows, c)
		m.buckets[c] = &modelBucket{tokens: big.NewRat(min(left, to.Capacity), 1), last: m.now}
	}
}

// snapshotResolve freezes the model's resolution as it is now.
func (m *model) snapshotResolve() func(string) (string, bucket.Policy) {
	def, tiers, assign := m.def, maps.Clone(m.tiers), maps.Clone(m.assign)
	return func(c string) (string, bucket.Policy) {
		if name := assign[c]; name != "" {
			if p, ok := tiers[name]; ok && modelValid(p) {
				return name, p
			}
		}
		return "default", def
	}
}

func (m *model) advance(stamp int64) { m.now = max(m.now, stamp) }

func (m *model) resolve(client string) (string, bucket.Policy) {
	if name := m.assign[client]; name != "" {
		if p, ok := m.tiers[name]; ok && modelValid(p) {
			return name, p
		}
	}
	return "default", m.def
}

var (
	ratNano    = big.NewRat(1_000_000_000, 1)
	ratPerNano = big.NewRat(1, 1_000_000_000_000_000_000) // rate unit × 1 ns, in tokens
)

// balance returns the client's tokens at now under p: min(capacity,
// tokens + elapsed × rate), or capacity for a client without a bucket.
func (m *model) balance(client string, p bucket.Policy) *big.Rat {
	capacity := big.NewRat(p.Capacity, 1)
	b, ok := m.buckets[client]
	if !ok {
		return capacity
	}
	gain := new(big.Rat).SetInt(new(big.Int).Mul(big.NewInt(m.now-b.last), big.NewInt(p.Rate)))
	gain.Mul(gain, ratPerNano)
	tokens := gain.Add(gain, b.tokens)
	if tokens.Cmp(capacity) > 0 {
		return capacity
	}
	return tokens
}

// floorNano is floor(r × 1e9) for r >= 0.
func floorNano(r *big.Rat) int64 {
	x := new(big.Rat).Mul(r, ratNano)
	q := new(big.Int).Quo(x.Num(), x.Denom())
	return q.Int64()
}

// waitFor is how many nanoseconds, rounded up, until tokens reach target
// under p: 0 if they already do, never if they never will.
func waitFor(p bucket.Policy, tokens *big.Rat, target int64) int64 {
	t := big.NewRat(target, 1)
	if tokens.Cmp(t) >= 0 {
		return 0
	}
	if target > p.Capacity || p.Rate == 0 {
		return bucket.Never
	}
	ns := new(big.Rat).Sub(t, tokens)
	ns.Quo(ns, new(big.Rat).Mul(big.NewRat(p.Rate, 1), ratPerNano))
	q, r := new(big.Int).QuoRem(ns.Num(), ns.Denom(), new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return math.MaxInt64
	}
	return q.Int64()
}

func (m *model) decide(r fsm.AllowRequest) fsm.Decision {
	key := dedupKey{r.Client, r.RequestID}
	if r.RequestID != "" {
		if s, ok := m.seen[key]; ok && s.seq > m.puts-m.max && s.decision.Stamp >= m.now-m.window {
			d := s.decision
			d.Duplicate = true
			return d
		}
	}
	tier, p := m.resolve(r.Client)
	d := fsm.Decision{Tier: tier, Stamp: m.now, Rate: p.Rate, RateKnown: true, Shadow: p.Mode == bucket.Shadow}
	d.Limit = p.Capacity
	if p.Algorithm == bucket.SlidingWindow {
		d = m.decideWindow(r, p, d)
	} else {
		d = m.decideBucket(r, p, d)
	}
	if r.RequestID != "" {
		m.puts++
		m.seen[key] = modelSeen{decision: d, seq: m.puts}
	}
	return d
}

// decideWindow is the sliding window's definition: admissions less than W
// old count; the request fits if they and its cost are at most the limit.
// The client keeps only the admissions that still count.
func (m *model) decideWindow(r fsm.AllowRequest, p bucket.Policy, d fsm.Decision) fsm.Decision {
	var kept []modelAdmission
	for _, a := range m.windows[r.Client] {
		if m.now-a.at < p.Window {
			kept = append(kept, a)
		}
	}
	used := m.used(r.Client, p)
	d.Window = p.Window
	d.Allowed = used+r.Cost <= p.Capacity
	if d.Allowed && r.Cost > 0 {
		kept = append(kept, modelAdmission{m.now, r.Cost})
		used += r.Cost
	}
	d.Remaining = max(0, p.Capacity-used) * 1_000_000_000
	switch {
	case d.Allowed:
	case r.Cost > p.Capacity:
		d.RetryAfter = bucket.Never
	default:
		d.RetryAfter = m.fitsAfter(kept, p, r.Cost)
	}
	if len(kept) > 0 {
		d.ResetAfter = kept[len(kept)-1].at + p.Window - m.now
	}
	m.windows[r.Client] = kept // kept even empty, like a bucket a peek made
	return d
}

// fitsAfter is how long until cost fits in log's window: the first time
// an admission stops counting at which what still counts leaves room (for
// a cost at most the limit, which the last expiry always does).
func (m *model) fitsAfter(log []modelAdmission, p bucket.Policy, cost int64) int64 {
	for _, a := range log {
		if at := a.at + p.Window; m.usedAt(log, p, at)+cost <= p.Capacity {
			return at - m.now
		}
	}
	return 0
}

func (m *model) usedAt(log []modelAdmission, p bucket.Policy, at int64) int64 {
	var u int64
	for _, a := range log {
		if at-a.at < p.Window {
			u += a.cost
		}
	}
	return u
}

func (m *model) decideBucket(r fsm.AllowRequest, p bucket.Policy, d fsm.Decision) fsm.Decision {
	tokens := m.balance(r.Client, p)
	cost := big.NewRat(r.Cost, 1)
	if tokens.Cmp(cost) >= 0 {
		d.Allowed = true
		tokens = new(big.Rat).Sub(tokens, cost)
	} else {
		d.RetryAfter = waitFor(p, tokens, r.Cost)
	}
	d.Remaining = floorNano(tokens)
	d.ResetAfter = waitFor(p, tokens, p.Capacity)
	m.buckets[r.Client] = &modelBucket{tokens: tokens, last: m.now}
	return d
}

// reclaim forgets the buckets that are full now under their client's
// policy, and the windows in which nothing counts any more.
func (m *model) reclaim() int {
	n := 0
	for c := range m.buckets {
		_, p := m.resolve(c)
		if m.balance(c, p).Cmp(big.NewRat(p.Capacity, 1)) == 0 {
			delete(m.buckets, c)
			n++
		}
	}
	for c := range m.windows {
		_, p := m.resolve(c)
		if m.used(c, p) == 0 {
			delete(m.windows, c)
			n++
		}
	}
	// A record outlives the bucket, and the assignment by 30 days.
	for c, r := range m.records {
		if _, assigned := m.assign[c]; !assigned && max(r.Assigned.At, r.Reset.At) < m.now-int64(30*24*time.Hour) {
			delete(m.records, c)
			m.pruned++
		}
	}
	return n
}

// isAudited reports whether an operator action is recorded: it has a
// stamp or an actor.
func isAudited(a fsm.Audited) bool { return a.Stamp != 0 || a.Actor != "" }

// act is what an audited action records: an action without an actor is
// anonymous's.
func act(a fsm.Audited) fsm.Act {
	if a.Actor == "" {
		return fsm.Act{At: a.Stamp, By: "anonymous"}
	}
	return fsm.Act{At: a.Stamp, By: a.Actor}
}

// recordChange adds a configuration change to the trail, from the
// policies before and after it.
func (m *model) recordChange(op fsm.ConfigOp, before, after *bucket.Policy) {
	if !isAudited(op.Audited) {
		return
	}
	m.audit = append(m.audit, fsm.AuditEntry{Version: m.version, Act: act(op.Audited), Kind: op.Kind, Tier: op.Tier, Before: before, After: after, OnRaise: op.OnRaise})
}

// policyOf is the policy tier has in the model, or nil; "" is the
// default.
func (m *model) policyOf(tier string) *bucket.Policy {
	if tier == "" {
		p := m.def
		return &p
	}
	if p, ok := m.tiers[tier]; ok {
		return &p
	}
	return nil
}

// configOp returns the error the FSM must refuse op with, or nil after
// applying it.
func (m *model) configOp(op fsm.ConfigOp) error {
	before := m.snapshotResolve()
	was := m.policyOf(op.Tier)
	filled := map[string]bool{}
	switch op.Kind {
	case fsm.OpSetTier:
		if slices.Contains(modelInvalidNames, op.Tier) {
			return bucket.ErrInvalidTierName
		}
		if !modelValid(op.Policy) {
			return bucket.ErrInvalidPolicy
		}
		// A fill happens when a tier that was in force is raised.
		if old, ok := m.tiers[op.Tier]; ok && modelValid(old) && op.OnRaise == bucket.Fill && op.Policy.Capacity > old.Capacity {
			filled[op.Tier] = true
		}
		m.tiers[op.Tier] = op.Policy
	case fsm.OpDeleteTier:
		if _, ok := m.tiers[op.Tier]; !ok {
			return fsm.ErrNoSuchTier
		}
		delete(m.tiers, op.Tier)
	case fsm.OpSetDefault:
		if !modelValid(op.Policy) {
			return bucket.ErrInvalidPolicy
		}
		if op.OnRaise == bucket.Fill && op.Policy.Capacity > m.def.Capacity {
			filled["default"] = true
		}
		m.def = op.Policy
	}
	m.version++
	if filled[op.Tier] || filled["default"] {
		m.fills++
	}
	m.changePolicies(before, filled)
	m.recordChange(op, was, m.policyOf(op.Tier))
	return nil
}

// driver sends random commands to an FSM and the model and compares.
type driver struct {
	t       *testing.T
	seed    uint64
	rng     *rand.Rand
	f       *fsm.FSM
	m       *model
	clients []string
	ids     map[string][]string // recent request ids per client
	nextID  int
	recent  []fsm.Command // the last commands, for failure messages

	decisions, duplicates, allowed, reclaimed, refused, resets int
	windowDecisions, shadowDecisions, restarts                 int
	ops                                                        map[string]int
	def                                                        bucket.Policy
}

const modelTimeLimit = int64(8e18) // stop taking huge steps before int64 nanoseconds run out

// failure is an assertion message, built only when the assertion fails: it
// names the seed that replays the run and the last commands applied.
type failure struct {
	d      *driver
	format string
	args   []any
}

func (d *driver) fail(format string, args ...any) failure { return failure{d, format, args} }

func (f failure) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "replay with -model.seed=%d; ", f.d.seed)
	fmt.Fprintf(&b, f.format, f.args...)
	b.WriteString("\nlast commands, oldest first:")
	for _, c := range f.d.recent {
		s := fmt.Sprintf("%+v", c)
		if len(s) > 300 {
			s = s[:300] + "..."
		}
		fmt.Fprintf(&b, "\n  %T %s", c, s)
	}
	return b.String()
}

func (d *driver) apply(c fsm.Command) any {
	if len(d.recent) == 8 {
		d.recent = d.recent[1:]
	}
	d.recent = append(d.recent, c)
	d.ops[c.Type().String()]++
	return d.f.ApplyCommand(fsm.Encode(c))
}

func (d *driver) stamp() int64 {
	now := d.m.now
	r := d.rng.IntN(1000)
	switch {
	case r < 200:
		return now
	case r < 400:
		return now + 1 + d.rng.Int64N(1000)
	case r < 850:
		return now + int64(time.Millisecond) + d.rng.Int64N(int64(5*time.Second))
	case r < 930:
		return now + int64(time.Minute) + d.rng.Int64N(int64(3*time.Hour))
	case r < 945 && now < modelTimeLimit:
		if d.rng.IntN(4) == 0 {
			return now + int64(365*24*time.Hour) + d.rng.Int64N(int64(365*24*time.Hour))
		}
		return now + int64(24*time.Hour) + d.rng.Int64N(int64(30*24*time.Hour))
	case r < 990:
		return now - 1 - d.rng.Int64N(int64(time.Hour))
	default:
		return []int64{0, math.MinInt64, -1, now - int64(100*365*24*time.Hour)}[d.rng.IntN(4)]
	}
}

func (d *driver) policy(cur bucket.Policy) bucket.Policy {
	p := d.shape(cur)
	if d.rng.IntN(8) == 0 {
		p.Mode = 1 - p.Mode
	}
	if d.rng.IntN(8) == 0 {
		p.WhenUnavailable = 1 - p.WhenUnavailable
	}
	return p
}

// shape changes cur's algorithm or numbers; a policy under a sliding
// window takes the window's rules.
func (d *driver) shape(cur bucket.Policy) bucket.Policy {
	const second = int64(1_000_000_000)
	toWindow := cur.Algorithm == bucket.SlidingWindow
	if d.rng.IntN(5) == 0 {
		toWindow = !toWindow
	}
	if toWindow {
		limits := []int64{1, 2, 3, 5, 10, 50, 100, 10_000}
		windows := []int64{1, 2, 5, 60, 3600, 86_400}
		if cur.Algorithm != bucket.SlidingWindow {
			return bucket.Policy{Algorithm: bucket.SlidingWindow, Capacity: limits[d.rng.IntN(len(limits))], Window: windows[d.rng.IntN(len(windows))] * second, Mode: cur.Mode, WhenUnavailable: cur.WhenUnavailable}
		}
		switch d.rng.IntN(4) {
		case 0:
			cur.Capacity = min(cur.Capacity*2+d.rng.Int64N(3), 10_000)
		case 1:
			cur.Capacity = max(cur.Capacity/2, 1)
		default:
			cur.Window = windows[d.rng.IntN(len(windows))] * second
		}
		return cur
	}
	if cur.Algorithm == bucket.SlidingWindow {
		cur = bucket.Policy{Capacity: cur.Capacity, Rate: bucket.Scale, Mode: cur.Mode, WhenUnavailable: cur.WhenUnavailable}
	}
	capacities := []int64{1, 2, 3, 5, 10, 50, 100, 1000, 1_000_000, bucket.MaxCapacity}
	rates := []int64{0, 1, 7, 333_333_333, bucket.Scale / 2, bucket.Scale, 3 * bucket.Scale, 1000 * bucket.Scale, bucket.MaxRate}
	switch d.rng.IntN(6) {
	case 0: // capacity up
		cur.Capacity = min(cur.Capacity*2+d.rng.Int64N(3), bucket.MaxCapacity)
	case 1: // capacity down
		cur.Capacity = max(cur.Capacity/2, 1)
	case 2: // rate up
		cur.Rate = min(cur.Rate*2+d.rng.Int64N(bucket.Scale), bucket.MaxRate)
	case 3: // rate down or to zero
		cur.Rate = []int64{0, cur.Rate / 3}[d.rng.IntN(2)]
	default:
		cur.Capacity = capacities[d.rng.IntN(len(capacities))]
		if d.rng.IntN(3) == 0 {
			cur.Rate = d.rng.Int64N(10 * bucket.Scale)
		} else {
			cur.Rate = rates[d.rng.IntN(len(rates))]
		}
	}
	if cur.Capacity < 1 {
		cur.Capacity = 1
	}
	return cur
}

func (d *driver) invalidPolicy() bucket.Policy {
	const second = int64(1_000_000_000)
	bad := []bucket.Policy{
		{Capacity: 0, Rate: bucket.Scale}, {Capacity: -3, Rate: 0}, {Capacity: 5, Rate: -1},
		{Capacity: bucket.MaxCapacity + 1, Rate: 0}, {Capacity: 5, Rate: bucket.MaxRate + 1},
		{Capacity: 5, Rate: 1, Window: second},
		{Algorithm: bucket.SlidingWindow, Capacity: 0, Window: second},
		{Algorithm: bucket.SlidingWindow, Capacity: 10_001, Window: second},
		{Algorithm: bucket.SlidingWindow, Capacity: 5, Window: 0},
		{Algorithm: bucket.SlidingWindow, Capacity: 5, Window: second + 1},
		{Algorithm: bucket.SlidingWindow, Capacity: 5, Window: 86_401 * second},
		{Algorithm: bucket.SlidingWindow, Capacity: 5, Window: second, Rate: 1},
		{Algorithm: 2, Capacity: 5, Rate: 1},
		{Capacity: 5, Rate: 1, Mode: 2},
		{Capacity: 5, Rate: 1, WhenUnavailable: 2},
	}
	return bad[d.rng.IntN(len(bad))]
}

func (d *driver) pick(names []string) string { return names[d.rng.IntN(len(names))] }

func (d *driver) client() string {
	if d.rng.IntN(2) == 0 {
		return d.clients[d.rng.IntN(5)] // hot
	}
	return d.clients[d.rng.IntN(len(d.clients))]
}

func (d *driver) request() fsm.AllowRequest {
	r := fsm.AllowRequest{Client: d.client()}
	switch x := d.rng.IntN(100); {
	case x < 85:
		r.Cost = d.rng.Int64N(4)
	case x < 93:
		_, p := d.m.resolve(r.Client)
		r.Cost = min(p.Capacity+d.rng.Int64N(3), bucket.MaxCost) // at or above capacity
	default:
		r.Cost = d.rng.Int64N(2000)
	}
	if d.rng.IntN(100) < 15 {
		ids := d.ids[r.Client]
		switch x := d.rng.IntN(10); {
		case x < 5 && len(ids) > 0: // a retry
			r.RequestID = ids[d.rng.IntN(len(ids))]
		case x < 6: // an id another client used
			other := d.ids[d.client()]
			if len(other) > 0 {
				r.RequestID = other[d.rng.IntN(len(other))]
				break
			}
			fallthrough
		default:
			d.nextID++
			r.RequestID = fmt.Sprintf("req-%d", d.nextID)
			if len(ids) == 4 {
				ids = ids[1:]
			}
			d.ids[r.Client] = append(ids, r.RequestID)
		}
	}
	return r
}

func (d *driver) allow() {
	a := fsm.Allow{Stamp: d.stamp(), Requests: make([]fsm.AllowRequest, 1+d.rng.IntN(50))}
	for i := range a.Requests {
		a.Requests[i] = d.request()
	}
	res, ok := d.apply(a).(*fsm.AllowResult)
	require.True(d.t, ok, d.fail("allow returned no *AllowResult"))
	require.Len(d.t, res.Decisions, len(a.Requests), d.fail("one decision per request"))
	d.m.advance(a.Stamp)
	for i, r := range a.Requests {
		want := d.m.decide(r)
		got := res.Decisions[i]
		if got != want {
			assert.Equal(d.t, want, got, d.fail("decision %d (request %d of the last command, %+v)", d.decisions, i, r))
			d.t.FailNow()
		}
		d.decisions++
		if got.Window != 0 {
			d.windowDecisions++
		}
		if got.Shadow {
			d.shadowDecisions++
		}
		if got.Duplicate {
			d.duplicates++
		}
		if got.Allowed {
			d.allowed++
		}
	}
}

func (d *driver) configOp() {
	var op fsm.ConfigOp
	switch x := d.rng.IntN(100); {
	case x < 40:
		op = setTierOp("free", d.policy(d.m.tiers["free"]))
	case x < 60:
		name := d.pick(modelTierNames)
		op = setTierOp(name, d.policy(d.m.tiers[name]))
	case x < 72:
		op = fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: d.pick(append(modelTierNames, "missing"))}
	case x < 84:
		op = fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: d.policy(d.m.def)}
	case x < 90:
		op = setTierOp(d.pick(modelTierNames), d.invalidPolicy())
	case x < 95:
		op = setTierOp(d.pick(modelInvalidNames), d.policy(d.m.def))
	default:
		op = fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: d.invalidPolicy()}
	}
	if op.Kind != fsm.OpDeleteTier && d.rng.IntN(3) == 0 {
		op.OnRaise = bucket.Fill
	}
	op.Audited = d.audited()
	got := d.apply(op)
	if d.refusedAudit(op.Audited, got) {
		return
	}
	res, ok := got.(*fsm.ConfigResult)
	require.True(d.t, ok, d.fail("config op returned no *ConfigResult"))
	wantErr := d.m.configOp(op)
	if wantErr != nil {
		d.refused++
		assert.ErrorIs(d.t, res.Err, wantErr, d.fail("refused %+v", op))
		assert.False(d.t, res.Changed, d.fail("refused %+v changed the config", op))
	} else {
		assert.NoError(d.t, res.Err, d.fail("config op %+v", op))
		assert.True(d.t, res.Changed, d.fail("config op %+v did not change the config", op))
	}
	assert.Equal(d.t, d.m.version, res.Version, d.fail("version after %+v", op))
}

func (d *driver) installConfig() {
	cfg := bucket.Config{Default: d.policy(d.m.def), Tiers: map[string]bucket.Policy{}}
	for _, name := range modelTierNames {
		if d.rng.IntN(2) == 0 {
			cfg.Tiers[name] = d.policy(d.m.tiers[name])
		}
	}
	if d.rng.IntN(2) == 0 {
		cfg.Tiers["broken"] = d.invalidPolicy() // a tier with an invalid policy resolves to the default
	}
	cfg.Version = d.m.version + 1 + d.rng.Uint64N(3)
	if d.rng.IntN(4) == 0 {
		cfg.Version = d.rng.Uint64N(d.m.version + 1) // not newer: ignored
	}
	// Fills the configuration records: some above the version in force
	// (they fill at this install), some at or below (filled before).
	cfg.Filled = map[string]uint64{}
	for _, name := range append(slices.Sorted(maps.Keys(cfg.Tiers)), "default") {
		if cfg.Version > 0 && d.rng.IntN(4) == 0 {
			cfg.Filled[name] = 1 + d.rng.Uint64N(cfg.Version)
		}
	}
	res, ok := d.apply(fsm.InstallConfig{Config: cfg}).(*fsm.ConfigResult)
	require.True(d.t, ok, d.fail("install returned no *ConfigResult"))
	changed := cfg.Version > d.m.version
	if changed {
		before := d.m.snapshotResolve()
		filled := map[string]bool{}
		for name, v := range cfg.Filled {
			if v > d.m.version {
				filled[name] = true
			}
		}
		d.m.version, d.m.def, d.m.tiers = cfg.Version, cfg.Default, cfg.Tiers
		d.m.changePolicies(before, filled)
	}
	assert.Equal(d.t, &fsm.ConfigResult{Version: d.m.version, Changed: changed}, res, d.fail("install v%d", cfg.Version))
}

// actors are the names the driver makes changes as.
var actors = []string{"ops", "deploy-bot", "anonymous"}

// audited draws who made an operator action and when: a third are not
// recorded (as cluster version 1 writes them), some are anonymous, and a
// few carry a stamp or an actor the FSM must refuse.
func (d *driver) audited() fsm.Audited {
	stamp := max(0, d.stamp())
	switch x := d.rng.IntN(24); {
	case x < 8:
		return fsm.Audited{}
	case x < 9:
		return []fsm.Audited{{Stamp: -1 - d.rng.Int64N(1000), Actor: "ops"}, {Stamp: stamp, Actor: strings.Repeat("a", 65)}}[d.rng.IntN(2)]
	case x < 12:
		return fsm.Audited{Stamp: stamp}
	}
	return fsm.Audited{Stamp: stamp, Actor: d.pick(actors)}
}

// refusedAudit checks that an action with an invalid stamp or actor was
// refused, and reports whether it was one.
func (d *driver) refusedAudit(a fsm.Audited, res any) bool {
	if a.Stamp >= 0 && len(a.Actor) <= 64 {
		return false
	}
	rej, ok := res.(*fsm.Rejected)
	assert.True(d.t, ok, d.fail("%+v: got %T, want *Rejected", a, res))
	if ok {
		assert.ErrorIs(d.t, rej.Err, fsm.ErrInvalidCommand)
	}
	d.refused++
	return true
}

func (d *driver) setTier() {
	s := fsm.SetTier{Client: d.client(), Tier: d.pick(modelAssignNames), Audited: d.audited()}
	got := d.apply(s)
	if d.refusedAudit(s.Audited, got) {
		return
	}
	res, ok := got.(*fsm.SetTierResult)
	require.True(d.t, ok, d.fail("set-tier returned no *SetTierResult"))
	assert.Equal(d.t, d.m.assign[s.Client], res.Previous, d.fail("%+v previous", s))
	_, from := d.m.resolve(s.Client)
	if s.Tier == "" {
		delete(d.m.assign, s.Client)
	} else {
		d.m.assign[s.Client] = s.Tier
	}
	_, to := d.m.resolve(s.Client)
	d.m.convert(s.Client, from, to)
	if isAudited(s.Audited) {
		r := d.m.records[s.Client]
		r.Assigned, r.AssignedTier = act(s.Audited), s.Tier
		d.m.records[s.Client] = r
	}
}

// resetClient forgets a client's bucket; the model drops it too, and keeps
// the client's tier and remembered request ids.
func (d *driver) resetClient() {
	c := fsm.ResetClient{Client: d.client(), Audited: d.audited()}
	got := d.apply(c)
	if d.refusedAudit(c.Audited, got) {
		return
	}
	res, ok := got.(*fsm.ResetResult)
	require.True(d.t, ok, d.fail("reset-client returned no *ResetResult"))
	assert.Equal(d.t, d.m.forget(c.Client), res.Existed, d.fail("%+v existed", c))
	if isAudited(c.Audited) {
		r := d.m.records[c.Client]
		r.Reset = act(c.Audited)
		d.m.records[c.Client] = r
	}
	d.resets++
}

func (d *driver) reclaim() {
	r := fsm.Reclaim{Stamp: d.stamp()}
	if d.m.now == 0 {
		r.Stamp = t0
	}
	res, ok := d.apply(r).(*fsm.ReclaimResult)
	require.True(d.t, ok, d.fail("reclaim returned no *ReclaimResult"))
	d.m.advance(r.Stamp)
	n := d.m.reclaim()
	d.reclaimed += n
	assert.Equal(d.t, n, res.Buckets, d.fail("buckets reclaimed at %d", d.m.now))
}

func (d *driver) checkState() {
	buckets, assignments, _ := d.f.Stats()
	assert.Equal(d.t, len(d.m.buckets)+len(d.m.windows), buckets, d.fail("bucket and window count"))
	assert.Equal(d.t, len(d.m.assign), assignments, d.fail("assignment count"))
	assert.Equal(d.t, d.m.now, d.f.HighWater(), d.fail("high water"))
	assert.Equal(d.t, d.m.version, d.f.Config().Version, d.fail("config version"))
	trail := d.f.Audit(0, fsm.MaxAuditEntries)
	assert.Equal(d.t, d.m.audit, trail.Entries, d.fail("audit trail"))
	assert.False(d.t, trail.More, d.fail("audit trail: more than it holds"))
	for _, c := range d.clients {
		r, ok := d.f.Record(c)
		want, wantOK := d.m.records[c]
		assert.Equal(d.t, wantOK, ok, d.fail("record of %s kept", c))
		assert.Equal(d.t, want, r, d.fail("record of %s", c))
	}
	if d.t.Failed() {
		d.t.FailNow()
	}
}

// checkViews compares every client's View with the model's balance.
func (d *driver) checkViews() {
	for _, c := range d.clients {
		v := d.f.View(c, d.m.now)
		tier, p := d.m.resolve(c)
		known := d.m.known(c)
		if p.Algorithm == bucket.SlidingWindow {
			used := d.m.used(c, p)
			want := fsm.ClientView{Client: c, AssignedTier: d.m.assign[c], Tier: tier, Policy: p, Known: known, At: d.m.now, Record: d.m.records[c],
				Decision: bucket.Decision{Allowed: used+1 <= p.Capacity, Remaining: max(0, p.Capacity-used) * bucket.Scale, Limit: p.Capacity}}
			// The view's times are the decision's: compare them through a
			// peek, which changes nothing.
			peek := d.m.peekWindow(c, p)
			want.Decision.RetryAfter, want.Decision.ResetAfter = peek.RetryAfter, peek.ResetAfter
			assert.Equal(d.t, want, v, d.fail("View(%s)", c))
			continue
		}
		tokens := d.m.balance(c, p)
		want := fsm.ClientView{
			Client: c, AssignedTier: d.m.assign[c], Tier: tier, Policy: p, Known: known, At: d.m.now, Record: d.m.records[c],
			Decision: bucket.Decision{
				Allowed: tokens.Cmp(big.NewRat(1, 1)) >= 0, Remaining: floorNano(tokens), Limit: p.Capacity,
				RetryAfter: waitFor(p, tokens, 1), ResetAfter: waitFor(p, tokens, p.Capacity),
			},
		}
		assert.Equal(d.t, want, v, d.fail("View(%s)", c))
	}
}

// peekWindow is what a cost-1 request would get from client's window,
// without changing the model.
func (m *model) peekWindow(c string, p bucket.Policy) fsm.Decision {
	saved, had := m.windows[c]
	d := m.decideWindow(fsm.AllowRequest{Client: c, Cost: 0}, p, fsm.Decision{})
	if had {
		m.windows[c] = saved
	} else {
		delete(m.windows, c)
	}
	if m.used(c, p)+1 > p.Capacity {
		d.RetryAfter = m.fitsAfter(saved, p, 1) // the limit is at least 1
	}
	return d
}

// restart replaces the FSM with one restored from its snapshot, which must
// encode to the same bytes: every later result then also checks the
// snapshot held all of the state.
func (d *driver) restart() {
	snap := d.f.MarshalSnapshot()
	g := newFSM(d.t, fsm.Options{Default: d.def, DedupMax: d.m.max})
	require.NoError(d.t, g.Restore(io.NopCloser(bytes.NewReader(snap))), d.fail("restore"))
	require.Equal(d.t, snap, g.MarshalSnapshot(), d.fail("a restored snapshot encodes differently"))
	d.f = g
	d.restarts++
}

// TestModel drives the FSM with random commands and checks every result
// against the reference model above.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -model.seed=%d)", seed, seed)
	const (
		minDecisions = 150_000
		dedupMax     = 2000 // small enough that ids are evicted by count too
	)
	def := bucket.Policy{Capacity: 7, Rate: bucket.Scale / 2}
	d := &driver{
		t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		f:   newFSM(t, fsm.Options{Default: def, DedupMax: dedupMax}),
		m:   newModel(def, fsm.DefaultDedupWindow, dedupMax),
		ids: map[string][]string{}, ops: map[string]int{}, def: def,
	}
	// The model is of the cluster version in force today: remembered
	// decisions keep their rates, and every policy may be used.
	apply[*fsm.ClusterVersionResult](t, d.f, fsm.SetClusterVersion{Version: fsm.MaxClusterVersion})
	for i := range 200 {
		d.clients = append(d.clients, fmt.Sprintf("client-%03d", i))
	}
	d.reclaim() // d.m.now is 0 here; move both clocks to t0
	start := time.Now()
	for i := 0; d.decisions < minDecisions; i++ {
		switch x := d.rng.IntN(100); {
		case x < 80:
			d.allow()
		case x < 88:
			d.setTier()
		case x < 95:
			d.configOp()
		case x < 97:
			d.installConfig()
		case x < 98:
			d.resetClient()
		default:
			d.reclaim()
		}
		if i%1000 == 999 {
			d.restart()
		}
		if i%500 == 0 {
			d.checkState()
		}
	}
	d.checkState()
	d.checkViews()
	elapsed := time.Since(start)
	t.Logf("seed %d: %d decisions (%d allowed, %d duplicates, %d by sliding windows, %d in shadow mode), %d buckets reclaimed, %d config ops refused, %d fills, %d restarts from snapshots, commands %v, group time advanced %v, in %v",
		seed, d.decisions, d.allowed, d.duplicates, d.windowDecisions, d.shadowDecisions, d.reclaimed, d.refused, d.m.fills, d.restarts, d.ops, time.Duration(d.m.now-t0), elapsed)

	// The run must have exercised what it claims to.
	assert.Greater(t, d.duplicates, 0, "no duplicate request ids")
	assert.Greater(t, d.reclaimed, 0, "nothing reclaimed")
	assert.Greater(t, d.resets, 0, "no client reset")
	assert.Greater(t, d.windowDecisions, 1000, "few sliding-window decisions")
	assert.Greater(t, d.shadowDecisions, 1000, "few shadow decisions")
	assert.Greater(t, d.m.fills, 0, "no fill on raise")
	assert.Greater(t, len(d.m.audit), 50, "few configuration changes audited")
	assert.Greater(t, d.m.pruned, 0, "no client record outlived its retention")
	assert.Greater(t, d.restarts, 0, "no restart from a snapshot")
	assert.Greater(t, d.refused, 0, "no config op refused")
	assert.Greater(t, d.allowed, 0)
	assert.Less(t, d.allowed, d.decisions, "nothing denied")
}
