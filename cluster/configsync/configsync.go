// Package configsync keeps every data group's configuration in step with
// the meta group's, where this node leads: a change is committed in the
// meta group (ChangeLocal) and waited for in every data group
// (WaitApplied); the meta leader hints every node to reconcile (Hint), and
// each installs, into the data groups it leads, the configuration the meta
// group committed (Reconcile), never the hint's content; a new cluster's
// meta leader seeds its first configuration (OnServingMeta).
package configsync

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/versions"
	"github.com/quorate/quorate/fsm"
)

// Config is what a Syncer needs of its node.
type Config struct {
	Self string // this node's id
	// Initial seeds a new cluster's configuration.
	Initial bucket.Config
	// Groups returns the meta group and the data groups.
	Groups func() (meta *raftgroup.Group, data []*raftgroup.Group)
	// LeaderOf says where g is served (the node's leaderOf).
	LeaderOf func(g *raftgroup.Group) (self bool, addr string)
	// Members returns the members hinted after a change (proven ones).
	Members func() map[string]membership.Member
	// RPC asks other nodes for the configuration, their groups' status and
	// to reconcile.
	RPC *peerrpc.Client
	// Versions raises the meta group's cluster version before a seed
	// that needs it.
	Versions *versions.Gate
	// Audited is who makes a change through g's leader, and when, as the
	// entry carries it.
	Audited func(g *raftgroup.Group, actor string) fsm.Audited
	// Trigger asks the node to run Reconcile soon.
	Trigger func()
	// Logger receives seeds, failed installs and hints.
	Logger *slog.Logger
}

// Syncer is one node's side of the configuration. Its methods are safe for
// concurrent use; Reconcile runs on one goroutine.
type Syncer struct {
	cfg     Config
	askMeta atomic.Bool // a push said the meta group has a newer configuration
}

// Initial returns c, a new cluster's first configuration, as it is seeded:
// the built-in default policy if it has none, configuration version 1. It
// refuses an invalid default, an invalid tier policy or too many tiers.
func Initial(c bucket.Config) (bucket.Config, error) {
	if c.Default == (bucket.Policy{}) {
		c.Default = bucket.BuiltinDefault
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	if len(c.Tiers) > bucket.MaxTiers {
		return c, fmt.Errorf("%w: %d tiers, at most %d", bucket.ErrTooManyTiers, len(c.Tiers), bucket.MaxTiers)
	}
	for _, name := range c.TierNames() {
		if err := c.Tiers[name].Validate(); err != nil {
			return c, fmt.Errorf("tier %q: %w", name, err)
		}
	}
	c.Version = 1
	return c, nil
}

// New returns the syncer of the node cfg describes.
func New(cfg Config) *Syncer { return &Syncer{cfg: cfg} }

// OnServingMeta is the meta group's OnServing: it seeds a new cluster's
// configuration (Config.Initial).
func (s *Syncer) OnServingMeta(g *raftgroup.Group) {
	if g.FSM.Config().Version != 0 {
		s.cfg.Trigger()
		return
	}
	if s.cfg.Initial.Extended() && g.FSM.ClusterVersion() < fsm.ClusterVersionPolicies {
		// A --config file with the policies of cluster version 2 needs the
		// meta group there first, which every member of a new cluster of
		// this release supports.
		if v, by := s.cfg.Versions.Supported(); v < fsm.ClusterVersionPolicies {
			s.cfg.Logger.Error("the configuration uses policies a member cannot run; not seeded", "member", by, "cluster_version", v)
			return
		}
		s.cfg.Versions.Apply(g, fsm.ClusterVersionPolicies, "the cluster version moved up to seed the configuration")
		if g.FSM.ClusterVersion() < fsm.ClusterVersionPolicies {
			return // retried at the next election, as a failed seed is
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.ApplyLocal(ctx, fsm.InstallConfig{Config: s.cfg.Initial}); err != nil {
		s.cfg.Logger.Error("seeding the configuration failed; it will be retried at the next election", "err", err)
		return
	}
	s.cfg.Logger.Info("configuration seeded", "version", s.cfg.Initial.Version, "tiers", len(s.cfg.Initial.Tiers))
	s.cfg.Trigger()
}

// Hint is what a configuration push does: the meta leader says a
// newer configuration is committed, so reconcile now, asking the meta
// group's leader for it rather than waiting for this node's replica. The
// pushed content is never installed: whoever can reach the port could push
// anything, and a data group installs only what the meta group committed.
func (s *Syncer) Hint() {
	s.askMeta.Store(true)
	s.cfg.Trigger()
}

// wanted is the newest configuration this node knows to be committed
// in the meta group: its own replica's, or the meta leader's when this node
// holds no replica, has none yet, or was told of a newer one. A hint is
// spent only once the leader has answered (or this node leads the meta
// group): while the leader is unknown or unreachable, the next reconcile
// asks again.
func (s *Syncer) wanted() bucket.Config {
	meta, _ := s.cfg.Groups()
	want := meta.FSM.Config()
	hinted := s.askMeta.Swap(false)
	if hinted || want.Version == 0 || !meta.IsVoter(s.cfg.Self) {
		answered := false
		switch self, addr := s.cfg.LeaderOf(meta); {
		case self:
			answered = true // this replica is the leader's
		case addr != "":
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			w, err := peerrpc.Call[peerrpc.WireConfig](ctx, s.cfg.RPC, addr, "/internal/config", struct{}{})
			cancel()
			if err == nil {
				answered = true
				if w.Version > want.Version {
					want = w.Config()
				}
			}
		}
		if hinted && !answered {
			s.askMeta.Store(true)
		}
	}
	return want
}

// Reconcile brings every data group this node leads up to the meta
// group's configuration version, by proposing the whole configuration into
// the group's own log. A group that cannot be reached now is retried on the
// next trigger or tick.
func (s *Syncer) Reconcile() {
	_, data := s.cfg.Groups()
	var lagging []*raftgroup.Group
	for _, g := range data {
		if g.Serving() {
			lagging = append(lagging, g)
		}
	}
	if len(lagging) == 0 {
		return
	}
	want := s.wanted()
	var wg sync.WaitGroup
	for _, g := range lagging {
		if g.FSM.Config().Version >= want.Version {
			continue
		}
		if want.Extended() && g.FSM.ClusterVersion() < fsm.ClusterVersionPolicies {
			// Its replicas may run a binary that cannot read the entry;
			// the version gate moves the group up first.
			s.cfg.Logger.Debug("config reconcile waits for the group's cluster version", "group", g.ID, "version", want.Version)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := g.ApplyLocal(ctx, fsm.InstallConfig{Config: want}); err != nil {
				s.cfg.Logger.Warn("config reconcile failed", "group", g.ID, "version", want.Version, "err", err)
			}
		}()
	}
	wg.Wait()
}

// ChangeLocal is the node's ChangeConfig on the meta group's leader: it
// commits op, hints every node to reconcile, and waits until every data
// group applied it (WaitApplied).
func (s *Syncer) ChangeLocal(ctx context.Context, op fsm.ConfigOp) (api.ConfigChange, error) {
	meta, _ := s.cfg.Groups()
	if err := ValidateOp(op); err != nil { // a peer's op is checked like a caller's
		return api.ConfigChange{}, err
	}
	if err := OpNeedsVersion(op, meta.FSM.ClusterVersion()); err != nil {
		return api.ConfigChange{}, err
	}
	if cfg := meta.FSM.Config(); op.Kind == fsm.OpSetTier && len(cfg.Tiers) >= bucket.MaxTiers {
		if _, exists := cfg.Tiers[op.Tier]; !exists {
			return api.ConfigChange{}, fmt.Errorf("%w: %d tiers defined, at most %d", bucket.ErrTooManyTiers, len(cfg.Tiers), bucket.MaxTiers)
		}
	}
	op.Audited = s.cfg.Audited(meta, op.Actor)
	if err := fsm.Validate(op); err != nil {
		return api.ConfigChange{}, err
	}
	res, err := meta.ApplyLocal(ctx, op)
	if err != nil {
		return api.ConfigChange{}, err
	}
	cr, ok := res.(*fsm.ConfigResult)
	if !ok {
		return api.ConfigChange{}, fmt.Errorf("meta group: unexpected apply result %T", res)
	}
	if cr.Err != nil {
		return api.ConfigChange{}, cr.Err
	}
	s.push()
	return s.WaitApplied(ctx, cr.Version), nil
}

// push tells every node that a configuration is committed, so that
// group leaders install it without waiting for their next reconcile tick.
// The push carries nothing: each node fetches the configuration from the
// meta group (see Hint).
func (s *Syncer) push() {
	s.cfg.Trigger() // this node leads the meta group: its replica is current
	for _, m := range s.cfg.Members() {
		if m.State != membership.Alive { // unproven members get no hints
			continue
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := peerrpc.Call[struct{}](ctx, s.cfg.RPC, m.Meta.RaftAddr, "/internal/install-config", struct{}{}); err != nil {
				s.cfg.Logger.Debug("config push failed", "to", m.Meta.ID, "err", err)
			}
		}()
	}
}

// OpNeedsVersion refuses op if it is of a type cluster version v may not
// commit.
func OpNeedsVersion(op fsm.ConfigOp, v uint32) error {
	if op.NeedsPolicies() && v < fsm.ClusterVersionPolicies {
		return fmt.Errorf("%w: sliding windows, shadow mode, when_unavailable and on_raise need cluster version %d, the cluster is at %d",
			errs.ErrClusterVersion, fsm.ClusterVersionPolicies, v)
	}
	return nil
}

// ValidateOp checks op as the meta group will apply it: a valid tier name
// and policy, of a known kind.
func ValidateOp(op fsm.ConfigOp) error {
	switch op.Kind {
	case fsm.OpSetTier:
		if err := bucket.ValidateTierName(op.Tier); err != nil {
			return err
		}
		return op.Policy.Validate()
	case fsm.OpDeleteTier:
		return bucket.ValidateTierName(op.Tier)
	case fsm.OpSetDefault:
		if err := op.Policy.Validate(); err != nil {
			return fmt.Errorf("default policy: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unknown config operation %d", op.Kind)
}

// WaitApplied waits until every data group's leader has applied version,
// or until 90% of ctx's remaining time is spent, and reports which did.
func (s *Syncer) WaitApplied(ctx context.Context, version uint64) api.ConfigChange {
	wait := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d) * 9 / 10
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_, data := s.cfg.Groups()
	done := map[string]bool{}
	for {
		remote := map[string]bool{} // leader addresses to ask
		for _, g := range data {
			if done[g.ID] {
				continue
			}
			if self, addr := s.cfg.LeaderOf(g); self {
				done[g.ID] = g.FSM.Config().Version >= version
			} else if addr != "" {
				remote[addr] = true
			}
		}
		for addr := range remote {
			sts, err := peerrpc.Call[[]peerrpc.WireGroupStatus](wctx, s.cfg.RPC, addr, "/internal/groups", struct{}{})
			if err != nil {
				continue
			}
			for _, st := range sts {
				if st.State == raft.Leader.String() && st.ConfigVersion >= version {
					done[st.ID] = true
				}
			}
		}
		cc := api.ConfigChange{Version: version}
		for _, g := range data {
			if done[g.ID] {
				cc.Applied = append(cc.Applied, g.ID)
			} else {
				cc.Lagging = append(cc.Lagging, g.ID)
			}
		}
		if len(cc.Lagging) == 0 {
			return cc
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-wctx.Done():
			return cc
		}
	}
}

// MaxAuditPage is the most changes one AuditLocal call returns.
const MaxAuditPage = 1000

// AuditLocal is the node's Audit on the meta group's leader: the changes
// after version since, at most limit of them (held to 1..MaxAuditPage),
// once the leader confirmed its leadership.
func (s *Syncer) AuditLocal(ctx context.Context, since uint64, limit int) (fsm.AuditPage, error) {
	meta, _ := s.cfg.Groups()
	if err := meta.VerifyRead(ctx); err != nil {
		return fsm.AuditPage{}, err
	}
	return meta.FSM.Audit(since, min(max(limit, 1), MaxAuditPage)), nil
}

// ConfigLocal is the node's Config on the meta group's leader: the
// configuration in force, once the leader confirmed its leadership.
func (s *Syncer) ConfigLocal(ctx context.Context) (bucket.Config, error) {
	meta, _ := s.cfg.Groups()
	if err := meta.VerifyRead(ctx); err != nil {
		return bucket.Config{}, err
	}
	return meta.FSM.Config(), nil
}

// Handle registers on mux the internal RPCs of the configuration: a change
// at the meta leader, its audit trail, its cluster version and
// configuration, and the hint to reconcile.
func (s *Syncer) Handle(mux *http.ServeMux) {
	peerrpc.Handle(mux, "/internal/config-op", func(ctx context.Context, w peerrpc.WireConfigOp) (peerrpc.WireConfigChange, error) {
		op, err := w.Op()
		if err != nil {
			return peerrpc.WireConfigChange{}, err
		}
		cc, err := s.ChangeLocal(ctx, op)
		return peerrpc.WireConfigChange(cc), err
	})
	peerrpc.Handle(mux, "/internal/audit", func(ctx context.Context, req peerrpc.WireAuditReq) (peerrpc.WireAuditPage, error) {
		p, err := s.AuditLocal(ctx, req.Since, req.Limit)
		return peerrpc.ToWireAuditPage(p), err
	})
	peerrpc.Handle(mux, "/internal/cluster-version", func(ctx context.Context, _ struct{}) (uint32, error) {
		meta, _ := s.cfg.Groups()
		if err := meta.VerifyRead(ctx); err != nil {
			return 0, err
		}
		return meta.FSM.ClusterVersion(), nil
	})
	peerrpc.Handle(mux, "/internal/config", func(ctx context.Context, _ struct{}) (peerrpc.WireConfig, error) {
		c, err := s.ConfigLocal(ctx)
		if err != nil {
			return peerrpc.WireConfig{}, err
		}
		return peerrpc.ToWireConfig(c), nil
	})
	// A hint from the meta leader that a new configuration is committed:
	// reconcile now rather than at the next tick. The body says nothing (a
	// configuration from older nodes, ignored): see Hint.
	peerrpc.Handle(mux, "/internal/install-config", func(_ context.Context, _ struct{}) (struct{}, error) {
		s.Hint()
		return struct{}{}, nil
	})
}
