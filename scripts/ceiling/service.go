package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/server/httpapi"
)

// Options configure a Service. The zero value of every field means its default.
type Options struct {
	// Shards is the number of independently locked parts of the client
	// table (default 64).
	Shards int
	// Default is the default policy (bucket.BuiltinDefault if zero).
	Default bucket.Policy
	// Now is the clock decisions are stamped with (time.Now if nil).
	Now func() time.Time
	// DedupWindow is how long a request id is remembered
	// (fsm.DefaultDedupWindow if zero).
	DedupWindow time.Duration
	// DedupMax is the most request ids one shard remembers at once
	// (fsm.DefaultDedupMax divided by Shards if zero).
	DedupMax int
}

// Service is quorate's decision semantics without replication or a log: an
// in-memory httpapi.Service that decides each request with the same bucket
// math as fsm.FSM, on a table of clients split into shards that are locked
// independently. It is the ceiling a replicated node is measured against,
// not a limiter to deploy: its state dies with the process and it never
// forgets a bucket (quorate forgets full ones every minute).
//
// Like a Raft group, each shard has a high-water time: a decision is
// stamped max(clock, last stamp), so a clock that steps back refills
// nobody. Request ids are remembered per shard as the FSM remembers them
// per group. All methods are safe for concurrent use.
type Service struct {
	now    func() time.Time
	shards []shard
	ids    []string // shard numbers, reported as groups

	cfgMu  sync.Mutex // serialises configuration changes
	config atomic.Pointer[bucket.Config]
}

var _ httpapi.Service = (*Service)(nil)

// shard is one part of the client table, like one FSM's maps.
type shard struct {
	mu        sync.Mutex
	highWater int64
	buckets   map[string]bucket.State
	tiers     map[string]string
	dedup     dedupWindow
}

// New returns an empty Service. It fails if opts.Default is set and invalid.
func New(opts Options) (*Service, error) {
	if opts.Shards <= 0 {
		opts.Shards = 64
	}
	if opts.Default == (bucket.Policy{}) {
		opts.Default = bucket.BuiltinDefault
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.DedupWindow <= 0 {
		opts.DedupWindow = time.Duration(fsm.DefaultDedupWindow)
	}
	if opts.DedupMax <= 0 {
		opts.DedupMax = max(1, fsm.DefaultDedupMax/opts.Shards)
	}
	cfg, err := bucket.NewConfig(opts.Default)
	if err != nil {
		return nil, err
	}
	s := &Service{now: opts.Now, shards: make([]shard, opts.Shards)}
	s.config.Store(&cfg)
	for i := range s.shards {
		s.ids = append(s.ids, strconv.Itoa(i))
		s.shards[i] = shard{
			buckets: map[string]bucket.State{},
			tiers:   map[string]string{},
			dedup:   dedupWindow{window: int64(opts.DedupWindow), max: opts.DedupMax, byKey: map[dedupKey]fsm.Decision{}},
		}
	}
	return s, nil
}

// shardOf returns client's shard: FNV-1a 64 of the id, as cluster.GroupOf
// picks a group, without allocating.
func (s *Service) shardOf(client string) *shard {
	h := uint64(14695981039346656037)
	for i := 0; i < len(client); i++ {
		h ^= uint64(client[i])
		h *= 1099511628211
	}
	return &s.shards[h%uint64(len(s.shards))]
}

// Allow decides reqs in order, each under its shard's lock, at the clock's
// time read once for the call (the leader's stamp of an entry).
func (s *Service) Allow(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := s.config.Load()
	stamp := s.now().UnixNano()
	out := make([]fsm.Decision, len(reqs))
	for i, r := range reqs {
		out[i] = s.shardOf(r.Client).allow(cfg, r, stamp)
	}
	return out, nil
}

// allow is fsm's applyAllow for one request.
func (sh *shard) allow(cfg *bucket.Config, r fsm.AllowRequest, stamp int64) fsm.Decision {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := max(stamp, sh.highWater)
	sh.highWater = now
	sh.dedup.expire(now)
	if r.RequestID != "" {
		if d, ok := sh.dedup.byKey[dedupKey{r.Client, r.RequestID}]; ok {
			d.Duplicate = true
			return d
		}
	}
	tier, p := cfg.Resolve(sh.tiers[r.Client])
	st, ok := sh.buckets[r.Client]
	if !ok {
		st = bucket.New(p, now)
	}
	st, bd := bucket.Decide(p, st, now, r.Cost)
	sh.buckets[r.Client] = st
	d := fsm.Decision{Decision: bd, Tier: tier, Stamp: now}
	if r.RequestID != "" {
		sh.dedup.put(dedupKey{r.Client, r.RequestID}, d)
	}
	return d
}

// Client returns client's state at max(clock, shard time) without consuming.
func (s *Service) Client(ctx context.Context, client string) (fsm.ClientView, error) {
	if err := ctx.Err(); err != nil {
		return fsm.ClientView{}, err
	}
	cfg := s.config.Load()
	stamp := s.now().UnixNano()
	sh := s.shardOf(client)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := max(stamp, sh.highWater)
	assigned := sh.tiers[client]
	tier, p := cfg.Resolve(assigned)
	st, known := sh.buckets[client]
	if !known {
		st = bucket.New(p, now)
	}
	return fsm.ClientView{
		Client:       client,
		AssignedTier: assigned,
		Tier:         tier,
		Policy:       p,
		Known:        known,
		Decision:     bucket.Peek(p, st, now, 1),
		At:           now,
	}, nil
}

// SetClientTier assigns client to tier; an empty tier removes the
// assignment. The ceiling keeps no audit trail: actor is not recorded.
func (s *Service) SetClientTier(ctx context.Context, client, tier, _ string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sh := s.shardOf(client)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if tier == "" {
		delete(sh.tiers, client)
	} else {
		sh.tiers[client] = tier
	}
	return nil
}

// ResetClient forgets client's bucket, as the FSM does (recording no
// actor).
func (s *Service) ResetClient(ctx context.Context, client, _ string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	sh := s.shardOf(client)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, had := sh.buckets[client]
	delete(sh.buckets, client)
	return had, nil
}

// ChangeConfig applies op to the configuration, as the FSM does. A decision
// that started before the change may still use the previous configuration;
// every decision that starts after it returns uses the new one.
func (s *Service) ChangeConfig(ctx context.Context, op fsm.ConfigOp) (api.ConfigChange, error) {
	if err := ctx.Err(); err != nil {
		return api.ConfigChange{}, err
	}
	if op.Policy.Extended() || op.OnRaise != bucket.Keep {
		// The ceiling measures the token bucket's cost and nothing else.
		return api.ConfigChange{}, fmt.Errorf("%w: the in-memory ceiling runs token buckets in enforce mode only", bucket.ErrInvalidPolicy)
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	cur := *s.config.Load()
	var (
		next bucket.Config
		err  error
	)
	switch op.Kind {
	case fsm.OpSetTier:
		next, err = cur.WithTier(op.Tier, op.Policy, bucket.Keep)
	case fsm.OpDeleteTier:
		var ok bool
		if next, ok = cur.WithoutTier(op.Tier); !ok {
			err = fmt.Errorf("%w: %q", fsm.ErrNoSuchTier, op.Tier)
		}
	case fsm.OpSetDefault:
		next, err = cur.WithDefault(op.Policy, bucket.Keep)
	default:
		err = fmt.Errorf("ceiling: unknown configuration operation %d", op.Kind)
	}
	if err != nil {
		return api.ConfigChange{}, err
	}
	s.config.Store(&next)
	return api.ConfigChange{Version: next.Version, Applied: slices.Clone(s.ids)}, nil
}

// Audit is refused: the ceiling measures decisions and keeps no audit
// trail.
func (s *Service) Audit(context.Context, uint64, int) (fsm.AuditPage, error) {
	return fsm.AuditPage{}, fmt.Errorf("%w: the in-memory ceiling keeps no audit trail", cluster.ErrClusterVersion)
}

// Config returns the configuration in force.
func (s *Service) Config(ctx context.Context) (bucket.Config, error) {
	return *s.config.Load(), ctx.Err()
}

// Status describes the ceiling as a one-node cluster whose shards are its
// "groups", each led by itself.
func (s *Service) Status(ctx context.Context) (api.ClusterStatus, error) {
	version := s.config.Load().Version
	st := api.ClusterStatus{NodeID: "ceiling", Nodes: []api.NodeStatus{{ID: "ceiling", State: "alive"}}}
	for _, id := range s.ids {
		st.Groups = append(st.Groups, api.GroupStatus{
			ID: id, State: "Leader", Leader: "ceiling", Voters: []string{"ceiling"}, ConfigVersion: version,
		})
	}
	return st, ctx.Err()
}

// Ready is always nil: there is nothing to wait for.
func (s *Service) Ready(ctx context.Context) error { return nil }

// Routes says every shard is decided here; the ceiling has no address of
// its own to give, so callers keep sending to the one they use.
func (s *Service) Routes() cluster.Routes {
	return cluster.Routes{Groups: len(s.ids), Leaders: map[int]string{}}
}

// RoutesVersion is 0: the routes never change.
// PolicyOf is the policy client is decided by: the ceiling never fails
// to decide, so the HTTP API never asks.
func (s *Service) PolicyOf(client string) (string, bucket.Policy) {
	sh := s.shardOf(client)
	sh.mu.Lock()
	assigned := sh.tiers[client]
	sh.mu.Unlock()
	return s.config.Load().Resolve(assigned)
}

func (s *Service) RoutesVersion() uint64 { return 0 }

// dedupKey is a request id scoped to its client.
type dedupKey struct{ client, id string }

// dedupWindow remembers decisions by request id, oldest first, and forgets
// them after window nanoseconds of shard time or beyond max entries, as the
// FSM's window does.
type dedupWindow struct {
	window int64
	max    int
	byKey  map[dedupKey]fsm.Decision
	order  []dedupKey
}

func (d *dedupWindow) put(k dedupKey, dec fsm.Decision) {
	d.byKey[k] = dec
	d.order = append(d.order, k)
	if len(d.order) > d.max {
		d.drop(len(d.order) - d.max)
	}
}

func (d *dedupWindow) expire(now int64) {
	n := 0
	for n < len(d.order) && d.byKey[d.order[n]].Stamp < now-d.window {
		n++
	}
	d.drop(n)
}

func (d *dedupWindow) drop(n int) {
	if n == 0 {
		return
	}
	for _, k := range d.order[:n] {
		delete(d.byKey, k)
	}
	clear(d.order[:n])
	d.order = d.order[n:]
}
