package fsm

import (
	"cmp"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/bucket"
)

// Decision is the outcome of one AllowRequest.
type Decision struct {
	bucket.Decision
	// Tier is the tier whose policy decided, or bucket.DefaultTierName.
	Tier string
	// Rate is the refill rate of the policy that decided, in nanotokens per
	// second (bucket.Policy.Rate; 0 is a bucket that never refills). It
	// means something only when RateKnown is set: a zero Decision, an
	// Unresolved one, one remembered before the cluster version kept rates
	// (ClusterVersionOriginsAlways) or restored from a snapshot older than
	// format 3, and one forwarded by a leader that sends no rate, do not
	// know it.
	Rate int64
	// Stamp is the group time the decision was made at (nanoseconds since
	// the epoch): max(leader's stamp, group high-water time).
	Stamp int64
	// Duplicate reports that the request id was seen before and this is the
	// original decision, returned again; nothing was taken this time.
	Duplicate bool
	// Origin is the origin of the request that made the decision (0 if it
	// had none): for a Duplicate, it tells the proposing node whether the
	// decision was its own request's, applied before its answer was lost.
	Origin uint64
	// MaybeDuplicate reports a fresh decision for a request id the group
	// may have decided before: it forgot ids early (more than DedupMax
	// within the window), so it cannot tell this request from a retry of
	// one of them.
	MaybeDuplicate bool
	// Unresolved reports a Retry the group cannot resolve: it remembers no
	// decision for the request but may have forgotten one. Nothing was
	// decided; whether the first proposal was applied is unknown.
	Unresolved bool
	// Shed reports a request with a new request id that the group did not
	// decide because it remembers as many ids as it may (from
	// ClusterVersionIDMemory; see Options.RequestIDMax): nothing was taken
	// or remembered, and the same request may be sent again.
	Shed bool
	// RateKnown reports that Rate is the deciding policy's rate (see Rate).
	RateKnown bool
	// Window is the length of the sliding window that decided, in
	// nanoseconds; 0 when a token bucket decided.
	Window int64
	// Shadow reports a decision of a policy in shadow mode: Allowed is
	// what enforcing it would have answered, and the caller is answered
	// allowed whatever it is.
	Shadow bool
}

// AllowResult is the result of applying an Allow: one decision per request,
// in request order.
type AllowResult struct {
	Decisions []Decision
}

// ConfigResult is the result of a ConfigOp or InstallConfig.
type ConfigResult struct {
	// Version is the configuration version in force after the entry.
	Version uint64
	// Changed reports whether the entry changed the configuration.
	Changed bool
	// Err is set when a ConfigOp was refused (invalid policy or tier name, or
	// deleting a tier that does not exist); the configuration is unchanged.
	Err error
}

// SetTierResult is the result of a SetTier.
type SetTierResult struct {
	// Previous is the tier the client was assigned to before, or "".
	Previous string
}

// Rejected is the result of a committed entry that decodes but breaks its
// version's rules (see Validate): every replica refuses it the same way and
// changes nothing. Leaders validate before proposing, so only a bug or a
// forged proposal commits one.
type Rejected struct {
	Err error // wraps ErrInvalidCommand
}

// ReclaimResult is the result of a Reclaim.
type ReclaimResult struct {
	Buckets int // buckets forgotten
	Dedup   int // dedup entries expired
}

// Options configure an FSM. The zero value of a field means its default.
type Options struct {
	// Default is the default policy in force before any configuration entry
	// (bucket.BuiltinDefault if zero). It must be valid.
	Default bucket.Policy
	// DedupWindow is how long, in group time, a request id is remembered
	// (DefaultDedupWindow if zero).
	DedupWindow int64
	// DedupMax is the most request ids remembered at once below
	// ClusterVersionIDMemory (DefaultDedupMax if zero); the oldest are
	// forgotten first.
	DedupMax int
	// RequestIDMax is the most request ids remembered at once from
	// ClusterVersionIDMemory on (DefaultRequestIDMax if zero): none is
	// forgotten before its window ends, and a request with a new id past
	// it is shed (Decision.Shed). Like DedupMax it decides what a replica
	// applies, so every replica of a group must have the same.
	RequestIDMax int
	// OriginDedupWindow and OriginDedupMax are the same for requests
	// without an id, remembered under their origin (DefaultOriginDedupWindow
	// and DefaultOriginDedupMax if zero).
	OriginDedupWindow int64
	OriginDedupMax    int
	// OnConfig, if set, is called with the new version after an entry
	// changes the configuration. It runs inside Apply, so it must return
	// at once (signal a channel, do not block); it has no effect on state.
	OnConfig func(version uint64)
}

// FSM is one Raft group's state: configuration, tier assignments, buckets,
// the request-id window and the group's high-water time.
//
// Apply, ApplyBatch, Snapshot and Restore are called by raft from one
// goroutine. The read methods (Config, ClientTier, Peek, ...) may run
// concurrently with them and see the state after some complete entry.
type FSM struct {
	mu        sync.RWMutex
	highWater int64
	applied   uint64
	config    bucket.Config
	version   atomic.Uint64 // config.Version, readable without the lock
	nBuckets  atomic.Int64  // len(buckets), readable without the lock
	// stateBytes estimates what the state costs in live heap (see
	// StateBytes), readable without the lock; mapBytes is the part of it
	// the buckets, tier assignments and audit trail cost.
	stateBytes atomic.Int64
	mapBytes   int64
	// evictedEarly counts request ids this replica forgot before their
	// window ended because the group remembered the most it may (not part
	// of the replicated state: a metric since the process started).
	evictedEarly atomic.Uint64
	tiers        *tierMap              // client → assigned tier
	buckets      *cowMap[bucket.State] // client → bucket, for token-bucket policies
	// windows holds the clients whose policy is a sliding window. A client
	// has state in at most one of buckets and windows, the one of its
	// policy's algorithm: a change of algorithm converts it (convert).
	windows *cowMap[bucket.Window]
	// records and audit are the audit trail (audit.go): operator actions
	// per client, and the last configuration changes, oldest first.
	records *recordMap
	// recordsFloor is at most the newest act of every record of a client
	// without a tier assignment: none can be pruned before RecordRetention
	// past it (see Reclaimable).
	recordsFloor int64
	audit        []AuditEntry
	ids          *idMemory    // by request id
	byOrigin     *dedupWindow // requests without an id, by origin
	marks        map[uint32]originMark
	// idsForgottenUntil is the end of the window of the newest request id
	// forgotten early (by count): until then a request id the group does
	// not remember may have been decided before.
	idsForgottenUntil int64
	// clusterVersion is the cluster version in force (see version.go);
	// clusterVersionRead the same, readable without the lock.
	clusterVersion     uint32
	clusterVersionRead atomic.Uint32
	// epochsAllocated counts the AllocateEpoch entries applied.
	epochsAllocated uint64

	opts     Options // with defaults filled in
	initial  bucket.Config
	onConfig func(uint64)
	dispatch map[Type]func(Command) any
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// New returns an empty FSM. It fails if opts.Default is set and invalid.
func New(opts Options) (*FSM, error) {
	def := opts.Default
	if def == (bucket.Policy{}) {
		def = bucket.BuiltinDefault
	}
	cfg, err := bucket.NewConfig(def)
	if err != nil {
		return nil, err
	}
	opts.DedupWindow = min(cmp.Or(max(opts.DedupWindow, 0), DefaultDedupWindow), int64(maxDedupWindow))
	opts.DedupMax = cmp.Or(max(opts.DedupMax, 0), DefaultDedupMax)
	opts.RequestIDMax = cmp.Or(max(opts.RequestIDMax, 0), DefaultRequestIDMax)
	if opts.RequestIDMax > maxRequestIDMax {
		return nil, fmt.Errorf("fsm: RequestIDMax %d above %d, the most a group can address", opts.RequestIDMax, maxRequestIDMax)
	}
	opts.OriginDedupWindow = cmp.Or(max(opts.OriginDedupWindow, 0), DefaultOriginDedupWindow)
	opts.OriginDedupMax = cmp.Or(max(opts.OriginDedupMax, 0), DefaultOriginDedupMax)
	f := &FSM{initial: cfg, onConfig: opts.OnConfig, opts: opts}
	f.reset()
	f.dispatch = map[Type]func(Command) any{
		TypeAllow:         func(c Command) any { return f.applyAllow(c.(Allow)) },
		TypeAllowOrigin:   func(c Command) any { return f.applyAllow(c.(Allow)) },
		TypeConfigOp:      func(c Command) any { return f.applyConfigOp(c.(ConfigOp)) },
		TypeInstallConfig: func(c Command) any { return f.applyInstallConfig(c.(InstallConfig)) },
		TypeSetTier:       func(c Command) any { return f.applySetTier(c.(SetTier)) },
		TypeSetTierV2:     func(c Command) any { return f.applySetTier(c.(SetTier)) },
		TypeReclaim:       func(c Command) any { return f.applyReclaim(c.(Reclaim)) },

		TypeSetClusterVersion: func(c Command) any { return f.applySetClusterVersion(c.(SetClusterVersion)) },
		TypeAllocateEpoch:     func(c Command) any { return f.applyAllocateEpoch(c.(AllocateEpoch)) },
		TypeResetClient:       func(c Command) any { return f.applyResetClient(c.(ResetClient)) },

		TypeConfigOpV2:            func(c Command) any { return f.applyConfigOp(c.(ConfigOp)) },
		TypeInstallConfigPolicies: func(c Command) any { return f.applyInstallConfig(c.(InstallConfig)) },
	}
	return f, nil
}

// reset empties the state.
func (f *FSM) reset() {
	f.highWater = 0
	f.applied = 0
	f.config = f.initial
	f.version.Store(f.initial.Version)
	f.tiers = newTierMap()
	f.buckets = newCowMap[bucket.State]()
	f.windows = newCowMap[bucket.Window]()
	f.records = newRecordMap()
	f.recordsFloor = math.MaxInt64
	f.audit = nil
	forgot := func(o uint64) { f.forget(o, f.highWater) }
	f.ids = newIDMemory(f.opts.DedupWindow, forgot)
	f.byOrigin = newDedupWindow(f.opts.OriginDedupWindow, f.opts.OriginDedupMax, func(e dedupEntry) { forgot(e.decision.Origin) })
	f.marks = map[uint32]originMark{}
	f.idsForgottenUntil = 0
	f.clusterVersion = BaseClusterVersion
	f.clusterVersionRead.Store(BaseClusterVersion)
	f.mapBytes = 0
	f.epochsAllocated = 0
}

// bucketBytes and tierBytes estimate what a bucket and a tier assignment
// cost in live heap: the map entry, the state and the client id (each map
// holds its own copy of it; a tier's name is interned, see tierMap).
// Measured by BenchmarkStateBytes: 79 bytes a bucket with a 16-byte client
// id, 319 with a 256-byte one; by BenchmarkMillionClients, 72 bytes an
// assignment with a 16-byte client id.
func bucketBytes(client string) int64 { return 63 + int64(len(client)) }
func tierBytes(client string) int64   { return 56 + int64(len(client)) }

// StateBytes estimates the live heap this replica's state takes: buckets,
// tier assignments and remembered decisions, as of the last applied entry
// (the node's memory budget counts it; see cluster/memlimit/budget.go).
func (f *FSM) StateBytes() int64 { return f.stateBytes.Load() }

// settle publishes the lock-free counters after entries were applied or a
// snapshot restored. The caller holds the lock.
func (f *FSM) settle() {
	f.nBuckets.Store(int64(f.buckets.len() + f.windows.len()))
	f.stateBytes.Store(f.mapBytes + f.ids.bytes() + f.byOrigin.bytes)
}

// Apply applies one log entry. See ApplyBatch.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed log entries in order and returns one result
// per entry: *AllowResult, *ConfigResult, *SetTierResult, *ReclaimResult or
// *ClusterVersionResult for commands, *Rejected for a command that breaks its version's rules,
// nil for raft's own entries. It panics on an entry it cannot decode at all
// (an unknown version or type, or bytes that are not a command): skipping it
// would make this replica diverge from those that can.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	for i, l := range logs {
		if l.Index > f.applied {
			f.applied = l.Index
		}
		if l.Type != raft.LogCommand {
			continue
		}
		out[i] = f.applyBytes(l.Data)
	}
	f.settle()
	return out
}

// ApplyCommand applies one encoded command outside raft (for tests and
// tools that replay a log). It is ApplyBatch without the index bookkeeping.
func (f *FSM) ApplyCommand(data []byte) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.settle()
	return f.applyBytes(data)
}

func (f *FSM) applyBytes(data []byte) any {
	c, err := decodeStructure(data)
	if err != nil {
		panic(fmt.Sprintf("fsm: refusing to skip a committed entry: %v", err))
	}
	if err := Validate(c); err != nil {
		return &Rejected{Err: err}
	}
	return f.dispatch[c.Type()](c)
}

// advance moves the group's time to max(stamp, high water) and returns it.
func (f *FSM) advance(stamp int64) int64 {
	if stamp > f.highWater {
		f.highWater = stamp
	}
	return f.highWater
}

func (f *FSM) applyAllow(a Allow) *AllowResult {
	now := f.advance(a.Stamp)
	// Expire before looking ids up, so an id is forgotten exactly one window
	// after its decision whether or not anything was applied in between.
	f.ids.expire(now)
	f.byOrigin.expire(now)
	res := &AllowResult{Decisions: make([]Decision, len(a.Requests))}
	for i, r := range a.Requests {
		res.Decisions[i] = f.allowOne(r, now)
	}
	return res
}

// allowOne decides one request at group time now, or returns the decision
// remembered for it.
func (f *FSM) allowOne(r AllowRequest, now int64) Decision {
	// Since ClusterVersionOriginsAlways a first attempt is looked up too:
	// its retry may have overtaken it.
	always := f.clusterVersion >= ClusterVersionOriginsAlways
	byOrigin := r.RequestID == "" && r.Origin != 0
	var digest idDigest
	switch {
	case r.RequestID != "":
		digest = digestOf(r.Client, r.RequestID)
		if d, ok := f.ids.get(digest); ok {
			d.Duplicate, d.MaybeDuplicate = true, false
			return d
		}
	case byOrigin && (r.Retry || always):
		if d, ok := f.byOrigin.get(dedupKey{client: r.Client, origin: r.Origin}); ok {
			d.Duplicate, d.MaybeDuplicate = true, false
			return d
		}
	}
	if (r.Retry || always && byOrigin) && f.mayHaveForgotten(r.Origin) {
		return Decision{Unresolved: true, Stamp: now}
	}
	// From ClusterVersionIDMemory an id is never forgotten before its
	// window ends: a new one that does not fit is not decided.
	idsKept := f.clusterVersion >= ClusterVersionIDMemory
	if r.RequestID != "" && idsKept && f.ids.len() >= f.opts.RequestIDMax {
		return Decision{Shed: true, Stamp: now}
	}
	d := f.decide(r.Client, r.Cost, now)
	d.Origin = r.Origin
	d.MaybeDuplicate = r.RequestID != "" && now <= f.idsForgottenUntil
	kept := d
	if !always {
		// Snapshots of format 2 hold no rate: a replica restored from
		// one must answer a duplicate as the others do.
		kept.Rate, kept.RateKnown = 0, false
	}
	switch {
	case r.RequestID != "" && idsKept:
		f.ids.put(digest, "", "", false, kept, 0)
	case r.RequestID != "":
		if n, newest := f.ids.put(digest, r.Client, r.RequestID, true, kept, f.opts.DedupMax); n > 0 {
			f.evictedEarly.Add(uint64(n))
			f.idsForgottenUntil = max(f.idsForgottenUntil, newest+f.ids.window)
		}
	case byOrigin:
		f.byOrigin.put(dedupKey{client: r.Client, origin: r.Origin}, kept)
	}
	return d
}

func (f *FSM) decide(client string, cost, now int64) Decision {
	assigned, _ := f.tiers.get(client)
	tier, p := f.config.Resolve(assigned)
	out := Decision{Tier: tier, Stamp: now, Rate: p.Rate, RateKnown: true, Shadow: p.Mode == bucket.Shadow}
	if p.Algorithm == bucket.SlidingWindow {
		w, ok := f.windows.get(client)
		if !ok {
			f.mapBytes += bucketBytes(client)
		}
		before := bucket.WindowBytes(w)
		w, out.Decision = bucket.DecideWindow(p, w, now, cost)
		f.mapBytes += bucket.WindowBytes(w) - before
		f.windows.set(client, w)
		out.Window = p.Window
		return out
	}
	s, ok := f.buckets.get(client)
	if !ok {
		s = bucket.New(p, now)
		f.mapBytes += bucketBytes(client)
	}
	s, out.Decision = bucket.Decide(p, s, now, cost)
	f.buckets.set(client, s)
	return out
}

// forgetClient drops client's bucket or window: it is full (empty) again.
// It reports whether there was one.
func (f *FSM) forgetClient(client string) bool {
	if w, ok := f.windows.get(client); ok {
		f.windows.delete(client)
		f.mapBytes -= bucketBytes(client) + bucket.WindowBytes(w)
		return true
	}
	if _, ok := f.buckets.get(client); ok {
		f.buckets.delete(client)
		f.mapBytes -= bucketBytes(client)
		return true
	}
	return false
}

// convert moves client's state from policy from to policy to, at group
// time now, when their algorithms differ: the client keeps what it had left,
// never more than to allows (bucket.BucketToWindow, WindowToBucket).
func (f *FSM) convert(client string, from, to bucket.Policy, now int64) {
	switch {
	case from.Algorithm == to.Algorithm:
	case to.Algorithm == bucket.SlidingWindow:
		s, ok := f.buckets.get(client)
		if !ok {
			return
		}
		f.buckets.delete(client)
		if w := bucket.BucketToWindow(from, s, to, now); w.Used > 0 {
			f.windows.set(client, w)
			f.mapBytes += bucket.WindowBytes(w)
		} else {
			f.mapBytes -= bucketBytes(client)
		}
	default:
		w, ok := f.windows.get(client)
		if !ok {
			return
		}
		f.windows.delete(client)
		f.mapBytes -= bucket.WindowBytes(w)
		f.buckets.set(client, bucket.WindowToBucket(from, w, to, now))
	}
}

func (f *FSM) applyConfigOp(o ConfigOp) *ConfigResult {
	var (
		next bucket.Config
		err  error
	)
	switch o.Kind {
	case OpSetTier:
		next, err = f.config.WithTier(o.Tier, o.Policy, o.OnRaise)
	case OpDeleteTier:
		var ok bool
		if next, ok = f.config.WithoutTier(o.Tier); !ok {
			err = fmt.Errorf("%w: %q", ErrNoSuchTier, o.Tier)
		}
	case OpSetDefault:
		next, err = f.config.WithDefault(o.Policy, o.OnRaise)
	}
	if err != nil {
		return &ConfigResult{Version: f.config.Version, Err: err}
	}
	if f.recording(o.Audited) {
		f.recordChange(o, f.config, next)
	}
	f.setConfig(next)
	return &ConfigResult{Version: next.Version, Changed: true}
}

func (f *FSM) applyInstallConfig(ic InstallConfig) *ConfigResult {
	if ic.Config.Version <= f.config.Version {
		return &ConfigResult{Version: f.config.Version}
	}
	f.setConfig(ic.Config)
	return &ConfigResult{Version: ic.Config.Version, Changed: true}
}

// setConfig puts c in force. Clients with state whose policy changes
// algorithm are converted, and the clients of every tier c filled since
// the configuration in force are filled, both at the group's time: each
// depends only on the client's own state, so map order cannot change the
// outcome. Neither walks the clients unless some policy changed algorithm
// or was filled.
func (f *FSM) setConfig(c bucket.Config) {
	old := f.config
	filled := map[string]bool{}
	for name, v := range c.Filled {
		if v > old.Version {
			filled[name] = true
		}
	}
	if len(filled) > 0 || algorithmsChange(old, c) {
		now := f.highWater
		each := func(client string) {
			assigned, _ := f.tiers.get(client)
			_, from := old.Resolve(assigned)
			name, to := c.Resolve(assigned)
			if filled[name] {
				f.forgetClient(client)
				return
			}
			f.convert(client, from, to, now)
		}
		for _, client := range append(f.buckets.keys(), f.windows.keys()...) {
			each(client)
		}
	}
	f.config = c
	f.version.Store(c.Version)
	if f.onConfig != nil {
		f.onConfig(c.Version)
	}
}

// algorithmsChange reports whether some client resolves to a policy of
// another algorithm under c than under old.
func algorithmsChange(old, c bucket.Config) bool {
	differs := func(name string) bool {
		_, p := old.Resolve(name)
		_, q := c.Resolve(name)
		return p.Algorithm != q.Algorithm
	}
	if differs("") {
		return true
	}
	for name := range old.Tiers {
		if differs(name) {
			return true
		}
	}
	for name := range c.Tiers {
		if differs(name) {
			return true
		}
	}
	return false
}

func (f *FSM) applySetTier(s SetTier) *SetTierResult {
	prev, had := f.tiers.get(s.Client)
	if had {
		f.mapBytes -= tierBytes(s.Client)
	}
	_, from := f.config.Resolve(prev)
	_, to := f.config.Resolve(s.Tier)
	f.convert(s.Client, from, to, f.highWater)
	if f.recording(s.Audited) {
		f.recordAssignment(s.Client, s.Tier, act(s.Audited))
	}
	if s.Tier == "" {
		f.tiers.delete(s.Client)
		if r, ok := f.records.get(s.Client); ok {
			f.recordsFloor = min(f.recordsFloor, r.newestAct())
		}
	} else {
		f.tiers.set(s.Client, s.Tier)
		f.mapBytes += tierBytes(s.Client)
	}
	return &SetTierResult{Previous: prev}
}
