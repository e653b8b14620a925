package configsync

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clientops"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/raftgroup/raftgrouptest"
	"github.com/quorate/quorate/cluster/status"
	"github.com/quorate/quorate/cluster/versions"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/logbuf"
)

var (
	pro    = bucket.Policy{Capacity: 5, Rate: 2 * bucket.Scale}
	free   = bucket.Policy{Capacity: 2, Rate: bucket.Scale / 2}
	window = bucket.Policy{Algorithm: bucket.SlidingWindow, Capacity: 100, Window: 60 * bucket.Second} // cluster version 2
)

// node is one node's syncer over real groups, its internal RPCs (the
// syncer's, and /internal/groups as the node answers it) served on
// loopback. Its Trigger counts and kicks a reconcile loop, which runs only
// once a test starts it; LeaderOf is self for a group served here unless a
// test says another node leads it (leadAt).
type node struct {
	s        *Syncer
	meta     *raftgroup.Group
	data     []*raftgroup.Group
	addr     string // where its internal RPCs answer
	clock    *clock.Manual
	rpc      *peerrpc.Client
	logs     *logbuf.Buffer
	triggers atomic.Int32
	kick     chan struct{}

	mu      sync.Mutex
	leaders map[*raftgroup.Group]string
	members map[string]membership.Member
}

// newNode is node n1 over meta and data; edit may set what a test needs
// of its Config before the syncer is built.
func newNode(t *testing.T, meta *raftgroup.Group, data []*raftgroup.Group, edit ...func(*Config)) *node {
	t.Helper()
	n := &node{meta: meta, data: data, clock: clock.NewManual(), logs: &logbuf.Buffer{}, kick: make(chan struct{}, 1),
		leaders: map[*raftgroup.Group]string{}, members: map[string]membership.Member{}}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	n.rpc = &peerrpc.Client{HTTP: &http.Client{Transport: tr, Timeout: 5 * time.Second}}
	cfg := Config{
		Self:     "n1",
		Groups:   func() (*raftgroup.Group, []*raftgroup.Group) { return n.meta, n.data },
		LeaderOf: n.leaderOf,
		Members: func() map[string]membership.Member {
			n.mu.Lock()
			defer n.mu.Unlock()
			out := make(map[string]membership.Member, len(n.members))
			for id, m := range n.members {
				out[id] = m
			}
			return out
		},
		RPC:     n.rpc,
		Audited: func(g *raftgroup.Group, actor string) fsm.Audited { return clientops.Audited(g, n.clock, actor) },
		Trigger: func() {
			n.triggers.Add(1)
			select {
			case n.kick <- struct{}{}:
			default:
			}
		},
		Logger: slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, e := range edit {
		e(&cfg)
	}
	n.s = New(cfg)
	mux := http.NewServeMux()
	n.s.Handle(mux)
	peerrpc.Handle(mux, "/internal/groups", func(context.Context, struct{}) ([]peerrpc.WireGroupStatus, error) {
		return status.Groups(append([]*raftgroup.Group{n.meta}, n.data...)), nil
	})
	srv := httptest.NewServer(mux) // on 127.0.0.1
	t.Cleanup(srv.Close)
	n.addr = srv.Listener.Addr().String()
	return n
}

func (n *node) leaderOf(g *raftgroup.Group) (bool, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if addr, ok := n.leaders[g]; ok {
		return false, addr
	}
	return g.Serving(), ""
}

// leadAt says the node at addr leads g.
func (n *node) leadAt(g *raftgroup.Group, addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.leaders[g] = addr
}

// member makes other, in state, a member of n's gossip.
func (n *node) member(id string, state membership.State, other *node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.members[id] = membership.Member{State: state, Meta: membership.Meta{ID: id, RaftAddr: other.addr}}
}

// reconcileOnTrigger runs Reconcile on one goroutine whenever Trigger is
// called, as the node's reconcile loop does, until the test ends.
func (n *node) reconcileOnTrigger(t *testing.T) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-n.kick:
				n.s.Reconcile()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done }) // before the groups close
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// apply commits c in g, which this node serves.
func apply(t *testing.T, g *raftgroup.Group, c fsm.Command) any {
	t.Helper()
	res, err := g.ApplyLocal(ctxFor(t, 5*time.Second), c)
	require.NoError(t, err)
	return res
}

// seed installs c, made a first configuration, into g.
func seed(t *testing.T, g *raftgroup.Group, c bucket.Config) bucket.Config {
	t.Helper()
	c, err := Initial(c)
	require.NoError(t, err)
	apply(t, g, fsm.InstallConfig{Config: c})
	require.Equal(t, uint64(1), g.FSM.Config().Version)
	return c
}

// change commits op in g directly (not through a syncer) and returns the
// version it made.
func change(t *testing.T, g *raftgroup.Group, op fsm.ConfigOp) uint64 {
	t.Helper()
	cr, ok := apply(t, g, op).(*fsm.ConfigResult)
	require.True(t, ok)
	require.NoError(t, cr.Err)
	return cr.Version
}

func raiseTo(t *testing.T, g *raftgroup.Group, cv uint32) {
	t.Helper()
	apply(t, g, fsm.SetClusterVersion{Version: cv})
	require.Equal(t, cv, g.FSM.ClusterVersion())
}

// assertSameConfig checks that got is want (nil and empty maps alike, as
// the wire makes them).
// assertSameConfig checks got is want; msgAndArgs is a format and its
// arguments, as testify takes them.
func assertSameConfig(t *testing.T, want, got bucket.Config, msgAndArgs ...any) bool {
	t.Helper()
	msg := ""
	if len(msgAndArgs) > 0 {
		msg = fmt.Sprintf(fmt.Sprint(msgAndArgs[0]), msgAndArgs[1:]...)
	}
	return assert.True(t, want.Equal(got), "%s\nwant %+v\ngot  %+v", msg, want, got)
}

func tiers(n int) map[string]bucket.Policy {
	m := make(map[string]bucket.Policy, n)
	for i := range n {
		m[fmt.Sprintf("t%04d", i)] = pro
	}
	return m
}

func TestInitialFillsInTheBuiltinDefaultAtVersionOne(t *testing.T) {
	c, err := Initial(bucket.Config{})
	require.NoError(t, err)
	assert.Equal(t, bucket.BuiltinDefault, c.Default, "a cluster configured with nothing")
	assert.Equal(t, uint64(1), c.Version)

	c, err = Initial(bucket.Config{Version: 7, Default: free, Tiers: map[string]bucket.Policy{"pro": pro}})
	require.NoError(t, err)
	assert.Equal(t, free, c.Default, "a given default is kept")
	assert.Equal(t, map[string]bucket.Policy{"pro": pro}, c.Tiers)
	assert.Equal(t, uint64(1), c.Version, "whatever version it was given")

	c, err = Initial(bucket.Config{Tiers: tiers(bucket.MaxTiers)})
	require.NoError(t, err, "MaxTiers tiers are allowed")
	assert.Len(t, c.Tiers, bucket.MaxTiers)
}

func TestInitialRefusesAnInvalidDefaultTierPolicyOrTooManyTiers(t *testing.T) {
	for name, tc := range map[string]struct {
		c    bucket.Config
		want error
		says string
	}{
		"invalid default":     {bucket.Config{Default: bucket.Policy{Capacity: -1, Rate: 1}}, bucket.ErrInvalidPolicy, "default"},
		"invalid tier name":   {bucket.Config{Tiers: map[string]bucket.Policy{"Pro!": pro}}, bucket.ErrInvalidTierName, "Pro!"},
		"reserved tier name":  {bucket.Config{Tiers: map[string]bucket.Policy{bucket.DefaultTierName: pro}}, bucket.ErrInvalidTierName, "reserved"},
		"invalid tier policy": {bucket.Config{Tiers: map[string]bucket.Policy{"pro": pro, "zero": {Rate: 1}}}, bucket.ErrInvalidPolicy, `"zero"`},
		"too many tiers":      {bucket.Config{Tiers: tiers(bucket.MaxTiers + 1)}, bucket.ErrTooManyTiers, "1001 tiers"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Initial(tc.c)
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

func TestValidateOpRefusesBadNamesPoliciesAndKinds(t *testing.T) {
	for name, tc := range map[string]struct {
		op   fsm.ConfigOp
		want error // nil: accepted
	}{
		"set tier":                 {fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: pro}, nil},
		"set tier, a window":       {fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: window}, nil},
		"set tier, bad name":       {fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "Pro", Policy: pro}, bucket.ErrInvalidTierName},
		"set tier, the default":    {fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: bucket.DefaultTierName, Policy: pro}, bucket.ErrInvalidTierName},
		"set tier, bad policy":     {fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: bucket.Policy{Capacity: 0, Rate: 1}}, bucket.ErrInvalidPolicy},
		"delete tier":              {fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "pro"}, nil},
		"delete tier, policy left": {fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "pro", Policy: bucket.Policy{Capacity: -5}}, nil},
		"delete tier, no name":     {fsm.ConfigOp{Kind: fsm.OpDeleteTier}, bucket.ErrInvalidTierName},
		"set default":              {fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: free}, nil},
		"set default, bad policy":  {fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: 1, Rate: -1}}, bucket.ErrInvalidPolicy},
	} {
		t.Run(name, func(t *testing.T) {
			err := ValidateOp(tc.op)
			if tc.want == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.want)
			}
		})
	}
	for _, kind := range []fsm.ConfigOpKind{0, 4, 255} {
		err := ValidateOp(fsm.ConfigOp{Kind: kind, Tier: "pro", Policy: pro})
		assert.ErrorContains(t, err, fmt.Sprintf("unknown config operation %d", kind))
	}
}

func TestOpNeedsVersionRefusesPoliciesAndFillsBelowVersionTwo(t *testing.T) {
	plain := fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: pro}
	shadow := fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: bucket.Policy{Capacity: 5, Rate: 1, Mode: bucket.Shadow}}
	degraded := fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: 5, Rate: 1, WhenUnavailable: bucket.AllowDegraded}}
	fill := fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: pro, OnRaise: bucket.Fill}
	win := fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: window}

	assert.NoError(t, OpNeedsVersion(plain, fsm.BaseClusterVersion))
	for _, op := range []fsm.ConfigOp{shadow, degraded, fill, win} {
		err := OpNeedsVersion(op, fsm.BaseClusterVersion)
		assert.ErrorIs(t, err, errs.ErrClusterVersion, "%+v", op)
		assert.ErrorContains(t, err, fmt.Sprintf("the cluster is at %d", fsm.BaseClusterVersion))
		assert.NoError(t, OpNeedsVersion(op, fsm.ClusterVersionPolicies), "%+v", op)
	}
}

func TestOnServingMetaSeedsANewClustersFirstConfiguration(t *testing.T) {
	initial, err := Initial(bucket.Config{Default: free, Tiers: map[string]bucket.Policy{"pro": pro}})
	require.NoError(t, err)
	meta := raftgrouptest.Single(t, "meta", 0)
	n := newNode(t, meta, nil, func(c *Config) { c.Initial = initial })
	require.Zero(t, meta.FSM.Config().Version)

	n.s.OnServingMeta(meta)
	assertSameConfig(t, initial, meta.FSM.Config(), "committed in the meta group")
	assert.Equal(t, int32(1), n.triggers.Load(), "and the data groups are asked to reconcile")

	// A later election finds a configuration: it is reconciled, never
	// seeded again (nor over a change made since).
	v := change(t, meta, fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "pro"})
	last := meta.Raft.LastIndex()
	n.s.OnServingMeta(meta)
	assert.Equal(t, v, meta.FSM.Config().Version)
	assert.NotContains(t, meta.FSM.Config().Tiers, "pro")
	assert.Equal(t, last, meta.Raft.LastIndex(), "nothing proposed")
	assert.Equal(t, int32(2), n.triggers.Load())
	assert.Equal(t, 1, strings.Count(n.logs.String(), "configuration seeded"))
}

func TestOnServingMetaRaisesTheClusterVersionToSeedPoliciesOfVersionTwo(t *testing.T) {
	initial, err := Initial(bucket.Config{Tiers: map[string]bucket.Policy{"hourly": window}})
	require.NoError(t, err)
	require.True(t, initial.Extended())
	meta := raftgrouptest.Single(t, "meta", 0)
	gate := &versions.Gate{Self: "n1", Max: fsm.MaxClusterVersion,
		Groups:  func() (*raftgroup.Group, []*raftgroup.Group) { return meta, nil },
		Members: func() map[string]membership.Member { return nil },
		Logger:  slog.New(slog.DiscardHandler)}
	n := newNode(t, meta, nil, func(c *Config) { c.Initial, c.Versions = initial, gate })
	require.Equal(t, fsm.BaseClusterVersion, meta.FSM.ClusterVersion())

	n.s.OnServingMeta(meta)
	assert.Equal(t, fsm.ClusterVersionPolicies, meta.FSM.ClusterVersion(), "raised only as far as the seed needs")
	assertSameConfig(t, initial, meta.FSM.Config())
	assert.Equal(t, int32(1), n.triggers.Load())
}

func TestOnServingMetaDoesNotSeedPoliciesAMemberCannotRun(t *testing.T) {
	initial, err := Initial(bucket.Config{Tiers: map[string]bucket.Policy{"hourly": window}})
	require.NoError(t, err)
	meta := raftgrouptest.Single(t, "meta", 0)
	members := map[string]membership.Member{
		"n2": {State: membership.Alive, Meta: membership.Meta{ID: "n2", MaxClusterVersion: fsm.MaxClusterVersion}},
		"n3": {State: membership.Alive, Meta: membership.Meta{ID: "n3", MaxClusterVersion: fsm.BaseClusterVersion}},
	}
	gate := &versions.Gate{Self: "n1", Max: fsm.MaxClusterVersion,
		Groups:  func() (*raftgroup.Group, []*raftgroup.Group) { return meta, nil },
		Members: func() map[string]membership.Member { return members },
		Logger:  slog.New(slog.DiscardHandler)}
	n := newNode(t, meta, nil, func(c *Config) { c.Initial, c.Versions = initial, gate })
	last := meta.Raft.LastIndex()

	n.s.OnServingMeta(meta)
	assert.Zero(t, meta.FSM.Config().Version, "not seeded")
	assert.Equal(t, fsm.BaseClusterVersion, meta.FSM.ClusterVersion(), "nor the version raised")
	assert.Equal(t, last, meta.Raft.LastIndex(), "nothing proposed")
	assert.Zero(t, n.triggers.Load())
	assert.Contains(t, n.logs.String(), "member=n3", "the log names who holds it back")
}

func TestOnServingMetaLeavesAFailedSeedForTheNextElection(t *testing.T) {
	initial, err := Initial(bucket.Config{})
	require.NoError(t, err)
	meta := raftgrouptest.Waiting(t, "meta", 0) // lost leadership before seeding
	n := newNode(t, meta, nil, func(c *Config) { c.Initial = initial })

	n.s.OnServingMeta(meta)
	assert.Zero(t, meta.FSM.Config().Version)
	assert.Zero(t, n.triggers.Load(), "nothing committed to reconcile")
	assert.Contains(t, n.logs.String(), "seeding the configuration failed")
}

func TestChangeLocalCommitsInTheMetaGroupAndWaitsForEveryDataGroup(t *testing.T) {
	meta := raftgrouptest.Single(t, "meta", 2)
	data := []*raftgroup.Group{raftgrouptest.Single(t, "0", 0), raftgrouptest.Single(t, "1", 1)}
	n := newNode(t, meta, data)
	n.reconcileOnTrigger(t)
	seed(t, meta, bucket.Config{Default: free})

	cc, err := n.s.ChangeLocal(ctxFor(t, 5*time.Second), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: pro})
	require.NoError(t, err)
	want := meta.FSM.Config()
	assert.Equal(t, uint64(2), want.Version)
	assert.Equal(t, pro, want.Tiers["pro"])
	assert.Equal(t, want.Version, cc.Version)
	assert.Equal(t, []string{"0", "1"}, cc.Applied, "answered once every data group applied it")
	assert.Empty(t, cc.Lagging)
	for _, g := range data {
		assertSameConfig(t, want, g.FSM.Config(), "group %s", g.ID)
	}

	cc, err = n.s.ChangeLocal(ctxFor(t, 5*time.Second), fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: pro})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), cc.Version)
	assert.Equal(t, []string{"0", "1"}, cc.Applied)
	for _, g := range data {
		assert.Equal(t, pro, g.FSM.Config().Default, "group %s", g.ID)
	}
}

func TestChangeLocalReportsGroupsThatDidNotApplyByTheDeadline(t *testing.T) {
	meta := raftgrouptest.Single(t, "meta", 2)
	data := []*raftgroup.Group{raftgrouptest.Single(t, "0", 0), raftgrouptest.Single(t, "1", 1)}
	n := newNode(t, meta, data) // nothing reconciles
	seed(t, meta, bucket.Config{})

	ctx := ctxFor(t, 1500*time.Millisecond)
	cc, err := n.s.ChangeLocal(ctx, fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: pro})
	require.NoError(t, err, "the change is committed; lagging groups apply it when they can")
	assert.NoError(t, ctx.Err(), "answered before the caller's deadline")
	assert.Equal(t, uint64(2), meta.FSM.Config().Version)
	assert.Equal(t, uint64(2), cc.Version)
	assert.Empty(t, cc.Applied)
	assert.Equal(t, []string{"0", "1"}, cc.Lagging)
	assert.Equal(t, int32(1), n.triggers.Load(), "the node was asked to reconcile")
}

func TestChangeLocalRefusesBadInputAndChangesNothing(t *testing.T) {
	meta := raftgrouptest.Single(t, "meta", 1)
	data := []*raftgroup.Group{raftgrouptest.Single(t, "0", 0)}
	n := newNode(t, meta, data)
	n.reconcileOnTrigger(t)
	seed(t, meta, bucket.Config{Tiers: map[string]bucket.Policy{"pro": pro}})
	n.s.Reconcile()
	before := meta.FSM.Config()
	require.Equal(t, uint64(1), data[0].FSM.Config().Version)

	refused := func(op fsm.ConfigOp, want error) { // want nil: any error
		t.Helper()
		last := meta.Raft.LastIndex()
		cc, err := n.s.ChangeLocal(ctxFor(t, 5*time.Second), op)
		if want == nil {
			assert.Error(t, err, "%+v", op)
		} else {
			assert.ErrorIs(t, err, want, "%+v", op)
		}
		assert.Zero(t, cc.Version)
		assertSameConfig(t, before, meta.FSM.Config(), "%+v", op)
		assertSameConfig(t, before, data[0].FSM.Config(), "%+v", op)
		assert.Zero(t, n.triggers.Load(), "no node is hinted: %+v", op)
		if want != fsm.ErrNoSuchTier { // the one refusal the meta group itself makes
			assert.Equal(t, last, meta.Raft.LastIndex(), "nothing proposed: %+v", op)
		}
	}
	refused(fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "Bad Name", Policy: pro}, bucket.ErrInvalidTierName)
	refused(fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: bucket.Policy{Capacity: 0, Rate: 1}}, bucket.ErrInvalidPolicy)
	refused(fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: bucket.MaxCapacity + 1}}, bucket.ErrInvalidPolicy)
	refused(fsm.ConfigOp{Kind: 9, Tier: "pro", Policy: pro}, nil) // an unknown kind
	refused(fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: window}, errs.ErrClusterVersion)
	refused(fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: free, OnRaise: bucket.Fill}, errs.ErrClusterVersion)
	refused(fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "ghost"}, fsm.ErrNoSuchTier)

	// From version 2 on the actor is recorded, and must fit the entry.
	raiseTo(t, meta, fsm.ClusterVersionAudit)
	refused(fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: free, Audited: fsm.Audited{Actor: strings.Repeat("a", fsm.MaxActorLen+1)}},
		fsm.ErrInvalidCommand)
}

func TestChangeLocalRefusesANewTierPastMaxTiersButChangesAnExistingOne(t *testing.T) {
	meta := raftgrouptest.Single(t, "meta", 0)
	n := newNode(t, meta, nil)
	seed(t, meta, bucket.Config{Tiers: tiers(bucket.MaxTiers)})

	_, err := n.s.ChangeLocal(ctxFor(t, 5*time.Second), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "one-more", Policy: pro})
	assert.ErrorIs(t, err, bucket.ErrTooManyTiers)
	assert.Equal(t, uint64(1), meta.FSM.Config().Version)
	assert.NotContains(t, meta.FSM.Config().Tiers, "one-more")

	cc, err := n.s.ChangeLocal(ctxFor(t, 5*time.Second), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "t0007", Policy: free})
	require.NoError(t, err, "a tier that exists may change")
	assert.Equal(t, uint64(2), cc.Version)
	assert.Equal(t, free, meta.FSM.Config().Tiers["t0007"])
	assert.Len(t, meta.FSM.Config().Tiers, bucket.MaxTiers)
}

func TestChangeLocalOnANodeThatDoesNotLeadTheMetaGroupCommitsNothing(t *testing.T) {
	meta := raftgrouptest.Waiting(t, "meta", 0)
	n := newNode(t, meta, nil)
	_, err := n.s.ChangeLocal(ctxFor(t, 5*time.Second), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: pro})
	assert.ErrorIs(t, err, errs.ErrNotLeader, "nothing was appended: the caller may try the leader")
	assert.Zero(t, meta.FSM.Config().Version)
	assert.Zero(t, n.triggers.Load())
}

func TestChangeLocalRecordsWhoAndWhenByTheMetaLeadersClock(t *testing.T) {
	meta := raftgrouptest.Single(t, "meta", 0)
	n := newNode(t, meta, nil)
	seed(t, meta, bucket.Config{})
	raiseTo(t, meta, fsm.ClusterVersionAudit)

	first := n.clock.Now().UnixNano()
	_, err := n.s.ChangeLocal(ctxFor(t, 5*time.Second), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: pro,
		Audited: fsm.Audited{Actor: "alice", Stamp: 42}}) // a caller's stamp is not the leader's
	require.NoError(t, err)
	n.clock.Advance(time.Minute)
	_, err = n.s.ChangeLocal(ctxFor(t, 5*time.Second), fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "pro"})
	require.NoError(t, err)
	n.clock.Advance(time.Minute)
	_, err = n.s.ChangeLocal(ctxFor(t, 5*time.Second), fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: free, Audited: fsm.Audited{Actor: "bob"}})
	require.NoError(t, err)

	p, err := n.s.AuditLocal(ctxFor(t, 5*time.Second), 0, 10)
	require.NoError(t, err)
	require.Len(t, p.Entries, 3)
	assert.Equal(t, fsm.Act{At: first, By: "alice"}, p.Entries[0].Act)
	assert.Equal(t, fsm.Act{At: first + int64(time.Minute), By: fsm.Anonymous}, p.Entries[1].Act, "no actor is anonymous")
	assert.Equal(t, fsm.Act{At: first + 2*int64(time.Minute), By: "bob"}, p.Entries[2].Act)
	assert.Equal(t, []uint64{2, 3, 4}, []uint64{p.Entries[0].Version, p.Entries[1].Version, p.Entries[2].Version})
	assert.False(t, p.More)
}

func TestAuditLocalHoldsItsLimitToOneAtLeastAndReadsAfterSince(t *testing.T) {
	meta := raftgrouptest.Single(t, "meta", 0)
	n := newNode(t, meta, nil)
	seed(t, meta, bucket.Config{})
	raiseTo(t, meta, fsm.ClusterVersionAudit)
	for _, name := range []string{"a", "b", "c"} {
		_, err := n.s.ChangeLocal(ctxFor(t, 5*time.Second), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: name, Policy: pro})
		require.NoError(t, err)
	}
	tiersOf := func(p fsm.AuditPage) []string {
		var out []string
		for _, e := range p.Entries {
			out = append(out, e.Tier)
		}
		return out
	}
	for _, limit := range []int{0, -3} {
		p, err := n.s.AuditLocal(ctxFor(t, 5*time.Second), 0, limit)
		require.NoError(t, err)
		assert.Equal(t, []string{"a"}, tiersOf(p), "limit %d", limit)
		assert.True(t, p.More)
	}
	p, err := n.s.AuditLocal(ctxFor(t, 5*time.Second), 2, 2) // after version 2, "a"'s
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c"}, tiersOf(p))
	assert.False(t, p.More)
	assert.Equal(t, uint64(2), p.Oldest)

	other := newNode(t, raftgrouptest.Waiting(t, "meta", 0), nil)
	_, err = other.s.AuditLocal(ctxFor(t, 5*time.Second), 0, 10)
	assert.ErrorIs(t, err, errs.ErrNotLeader, "only the meta leader answers")
}

func TestWaitAppliedReportsLaggingGroupsWhenMostOfTheDeadlineIsSpent(t *testing.T) {
	meta := raftgrouptest.Single(t, "meta", 3)
	data := []*raftgroup.Group{raftgrouptest.Single(t, "0", 0), raftgrouptest.Single(t, "1", 1), raftgrouptest.Waiting(t, "2", 2)}
	n := newNode(t, meta, data) // group 2's leader is not known
	c := seed(t, data[0], bucket.Config{})

	start := time.Now()
	ctx := ctxFor(t, 1500*time.Millisecond)
	cc := n.s.WaitApplied(ctx, 1)
	assert.NoError(t, ctx.Err(), "answered before the caller's deadline")
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "after waiting most of it for the others")
	assert.Equal(t, uint64(1), cc.Version)
	assert.Equal(t, []string{"0"}, cc.Applied)
	assert.Equal(t, []string{"1", "2"}, cc.Lagging)

	// Once group 1 applies it, even a caller out of time hears so.
	apply(t, data[1], fsm.InstallConfig{Config: c})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	cc = n.s.WaitApplied(done, 1)
	assert.Equal(t, []string{"0", "1"}, cc.Applied)
	assert.Equal(t, []string{"2"}, cc.Lagging)

	cc = n.s.WaitApplied(ctxFor(t, 200*time.Millisecond), 2)
	assert.Equal(t, []string{"0", "1", "2"}, cc.Lagging, "no group has version 2")
}

// Node a leads the meta group and data group 0; node b leads data group 1
// and holds no meta replica; node c is a member gossip says is dead.
func TestAChangeReachesTheDataGroupsOtherNodesLeadThroughTheirHint(t *testing.T) {
	a := newNode(t, raftgrouptest.Single(t, "meta", 2), []*raftgroup.Group{raftgrouptest.Single(t, "0", 0), raftgrouptest.Waiting(t, "1", 1)})
	b := newNode(t, raftgrouptest.Waiting(t, "meta", 2), []*raftgroup.Group{raftgrouptest.Waiting(t, "0", 0), raftgrouptest.Single(t, "1", 1)})
	c := newNode(t, raftgrouptest.Waiting(t, "meta", 2), []*raftgroup.Group{raftgrouptest.Waiting(t, "0", 0), raftgrouptest.Waiting(t, "1", 1)})
	a.leadAt(a.data[1], b.addr)
	b.leadAt(b.meta, a.addr)
	b.leadAt(b.data[0], a.addr)
	a.member("n2", membership.Alive, b)
	a.member("n3", membership.Dead, c)
	for _, n := range []*node{a, b, c} {
		n.reconcileOnTrigger(t)
	}
	seed(t, a.meta, bucket.Config{})

	cc, err := a.s.ChangeLocal(ctxFor(t, 5*time.Second), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: pro})
	require.NoError(t, err)
	want := a.meta.FSM.Config()
	assert.Equal(t, uint64(2), cc.Version)
	assert.Equal(t, []string{"0", "1"}, cc.Applied, "group 1 as its leader, b, reports it")
	assert.Empty(t, cc.Lagging)
	assertSameConfig(t, want, a.data[0].FSM.Config())
	assertSameConfig(t, want, b.data[1].FSM.Config(), "b fetched it from the meta leader")
	assert.Positive(t, b.triggers.Load(), "b was hinted")
	assert.Zero(t, c.triggers.Load(), "a dead member is not hinted")
}

func TestReconcileInstallsTheMetaGroupsConfigurationNotTheHints(t *testing.T) {
	a := newNode(t, raftgrouptest.Single(t, "meta", 1), nil)
	b := newNode(t, raftgrouptest.Waiting(t, "meta", 1), []*raftgroup.Group{raftgrouptest.Single(t, "0", 0)})
	b.leadAt(b.meta, a.addr)
	seed(t, a.meta, bucket.Config{Default: free})
	want := a.meta.FSM.Config()

	// Whoever reaches the port may push anything: a huge version, a
	// generous default.
	forged := bucket.Config{Version: 99, Default: bucket.Policy{Capacity: bucket.MaxCapacity, Rate: bucket.MaxRate},
		Tiers: map[string]bucket.Policy{"evil": pro}}
	_, err := peerrpc.Call[struct{}](ctxFor(t, 5*time.Second), b.rpc, b.addr, "/internal/install-config", peerrpc.ToWireConfig(forged))
	require.NoError(t, err)
	require.Equal(t, int32(1), b.triggers.Load(), "the hint asks for a reconcile")

	b.s.Reconcile()
	got := b.data[0].FSM.Config()
	assertSameConfig(t, want, got, "the meta group's configuration")
	assert.NotContains(t, got.Tiers, "evil")
	assert.Zero(t, b.meta.FSM.Config().Version, "b's own meta replica is not written either")
}

func TestReconcileUsesItsOwnMetaReplicaUnlessAHintSaysTheLeaderHasNewer(t *testing.T) {
	a := newNode(t, raftgrouptest.Single(t, "meta", 1), nil)
	seed(t, a.meta, bucket.Config{})
	change(t, a.meta, fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: pro})
	change(t, a.meta, fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "free", Policy: free})
	require.Equal(t, uint64(3), a.meta.FSM.Config().Version)

	// b votes in the meta group, but its replica has only version 1 while
	// a leads with version 3 (b's own single-voter group stands for the
	// replica that has not caught up).
	b := newNode(t, raftgrouptest.Single(t, "meta", 1), []*raftgroup.Group{raftgrouptest.Single(t, "0", 0)})
	own := seed(t, b.meta, bucket.Config{Default: free})
	b.leadAt(b.meta, a.addr)
	require.True(t, b.meta.IsVoter("n1"))

	b.s.Reconcile()
	assertSameConfig(t, own, b.data[0].FSM.Config(), "its own replica's, without asking")

	b.s.Hint()
	assert.Equal(t, int32(1), b.triggers.Load())
	b.s.Reconcile()
	hinted := a.meta.FSM.Config()
	assertSameConfig(t, hinted, b.data[0].FSM.Config(), "the meta leader's, asked for after the hint")

	// The hint is spent: a's next change waits for b's replica (or the
	// next hint), and a group already at a newer version gets no entry.
	change(t, a.meta, fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "pro"})
	last := b.data[0].Raft.LastIndex()
	b.s.Reconcile()
	assertSameConfig(t, hinted, b.data[0].FSM.Config())
	assert.Equal(t, last, b.data[0].Raft.LastIndex(), "nothing proposed")

	b.s.Hint()
	b.s.Reconcile()
	assert.Equal(t, uint64(4), b.data[0].FSM.Config().Version)
	assert.NotContains(t, b.data[0].FSM.Config().Tiers, "pro")
}

// A hint is kept until the meta leader answers: with the leader unknown,
// then unreachable, each reconcile installs the node's own replica's
// configuration, and the first one after the leader is back asks it.
func TestAHintIsKeptUntilTheMetaLeaderAnswers(t *testing.T) {
	a := newNode(t, raftgrouptest.Single(t, "meta", 1), nil)
	seed(t, a.meta, bucket.Config{})
	change(t, a.meta, fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: pro})

	b := newNode(t, raftgrouptest.Single(t, "meta", 1), []*raftgroup.Group{raftgrouptest.Single(t, "0", 0)})
	own := seed(t, b.meta, bucket.Config{Default: free})
	b.leadAt(b.meta, "") // no leader known
	b.s.Hint()
	b.s.Reconcile()
	assertSameConfig(t, own, b.data[0].FSM.Config(), "no leader to ask: its own replica's")

	gone, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, gone.Close())
	b.leadAt(b.meta, gone.Addr().String()) // a leader that does not answer
	b.s.Reconcile()
	assertSameConfig(t, own, b.data[0].FSM.Config(), "the leader did not answer")

	b.leadAt(b.meta, a.addr)
	b.s.Reconcile()
	assertSameConfig(t, a.meta.FSM.Config(), b.data[0].FSM.Config(), "the hint was kept: the leader's, once it answers")
}

func TestReconcileWaitsForAGroupsClusterVersionBeforePoliciesOfVersionTwo(t *testing.T) {
	meta := raftgrouptest.Single(t, "meta", 2)
	data := []*raftgroup.Group{raftgrouptest.Single(t, "0", 0), raftgrouptest.Waiting(t, "1", 1)}
	n := newNode(t, meta, data)
	raiseTo(t, meta, fsm.ClusterVersionPolicies)
	seed(t, meta, bucket.Config{Tiers: map[string]bucket.Policy{"hourly": window}})
	require.Equal(t, fsm.BaseClusterVersion, data[0].FSM.ClusterVersion())

	last := data[0].Raft.LastIndex()
	n.s.Reconcile()
	assert.Zero(t, data[0].FSM.Config().Version, "its replicas may not read the entry yet")
	assert.Equal(t, last, data[0].Raft.LastIndex(), "nothing proposed")
	assert.Contains(t, n.logs.String(), "waits for the group's cluster version")

	raiseTo(t, data[0], fsm.ClusterVersionPolicies) // the version gate's move
	n.s.Reconcile()
	assertSameConfig(t, meta.FSM.Config(), data[0].FSM.Config())
	assert.Zero(t, data[1].FSM.Config().Version, "a group led elsewhere is its leader's to reconcile")
}

func TestHandleAnswersAPeersConfigurationCalls(t *testing.T) {
	a := newNode(t, raftgrouptest.Single(t, "meta", 0), nil)
	seed(t, a.meta, bucket.Config{Tiers: map[string]bucket.Policy{"pro": pro}})
	raiseTo(t, a.meta, fsm.ClusterVersionAudit)
	ctx := ctxFor(t, 5*time.Second)

	w, err := peerrpc.Call[peerrpc.WireConfig](ctx, a.rpc, a.addr, "/internal/config", struct{}{})
	require.NoError(t, err)
	assertSameConfig(t, a.meta.FSM.Config(), w.Config())
	cv, err := peerrpc.Call[uint32](ctx, a.rpc, a.addr, "/internal/cluster-version", struct{}{})
	require.NoError(t, err)
	assert.Equal(t, fsm.ClusterVersionAudit, cv)

	_, err = peerrpc.Call[peerrpc.WireConfigChange](ctx, a.rpc, a.addr, "/internal/config-op", peerrpc.WireConfigOp{Kind: "rename_tier", Tier: "pro"})
	assert.ErrorIs(t, err, fsm.ErrInvalidCommand, "an unknown kind is refused")
	_, err = peerrpc.Call[peerrpc.WireConfigChange](ctx, a.rpc, a.addr, "/internal/config-op",
		peerrpc.ToWireConfigOp(fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "ghost"}))
	assert.ErrorIs(t, err, fsm.ErrNoSuchTier, "the meta group's refusal reaches the peer")
	require.Equal(t, uint64(1), a.meta.FSM.Config().Version, "neither changed anything")

	wc, err := peerrpc.Call[peerrpc.WireConfigChange](ctx, a.rpc, a.addr, "/internal/config-op",
		peerrpc.ToWireConfigOp(fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "pro", Policy: free, Audited: fsm.Audited{Actor: "carol"}}))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), wc.Version)
	assert.Equal(t, free, a.meta.FSM.Config().Tiers["pro"])

	wp, err := peerrpc.Call[peerrpc.WireAuditPage](ctx, a.rpc, a.addr, "/internal/audit", peerrpc.WireAuditReq{Since: 0, Limit: 10})
	require.NoError(t, err)
	p, err := wp.Page()
	require.NoError(t, err)
	require.Len(t, p.Entries, 1)
	assert.Equal(t, "carol", p.Entries[0].By, "the peer's actor is recorded")
	assert.Equal(t, a.clock.Now().UnixNano(), p.Entries[0].At, "at the meta leader's time")

	// A node that does not lead the meta group answers none of its reads.
	b := newNode(t, raftgrouptest.Waiting(t, "meta", 0), nil)
	_, err = peerrpc.Call[peerrpc.WireConfig](ctx, b.rpc, b.addr, "/internal/config", struct{}{})
	assert.ErrorIs(t, err, errs.ErrNotLeader)
	_, err = peerrpc.Call[uint32](ctx, b.rpc, b.addr, "/internal/cluster-version", struct{}{})
	assert.ErrorIs(t, err, errs.ErrNotLeader)
}
