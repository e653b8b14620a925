package clientops

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/raftgroup/raftgrouptest"
	"github.com/quorate/quorate/fsm"
)

var (
	basic = bucket.Policy{Capacity: 5, Rate: bucket.Scale}   // 5 tokens, one more a second
	pro   = bucket.Policy{Capacity: 100, Rate: bucket.Scale} // tier "pro"
)

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// leader is a data group node n1 leads alone, at cluster version cv, with
// the default policy basic and a tier "pro", and a clock for its stamps.
func leader(t *testing.T, cv uint32) (*raftgroup.Group, *clock.Manual) {
	t.Helper()
	g := raftgrouptest.Single(t, "0", 0)
	apply(t, g, fsm.InstallConfig{Config: bucket.Config{Version: 1, Default: basic, Tiers: map[string]bucket.Policy{"pro": pro}}})
	if cv > fsm.BaseClusterVersion {
		apply(t, g, fsm.SetClusterVersion{Version: cv})
	}
	require.Equal(t, cv, g.FSM.ClusterVersion())
	return g, clock.NewManual()
}

func apply(t *testing.T, g *raftgroup.Group, c fsm.Command) any {
	t.Helper()
	res, err := g.ApplyLocal(ctx(t), c)
	require.NoError(t, err)
	return res
}

// spend has client take cost at clk's time.
func spend(t *testing.T, g *raftgroup.Group, clk clock.Clock, client string, cost int64) {
	t.Helper()
	apply(t, g, fsm.Allow{Stamp: clk.Now().UnixNano(), Requests: []fsm.AllowRequest{{Client: client, Cost: cost}}})
	require.True(t, g.FSM.Known(client))
}

func view(t *testing.T, g *raftgroup.Group, clk clock.Clock, client string) fsm.ClientView {
	t.Helper()
	v, err := View(ctx(t), g, clk, client)
	require.NoError(t, err)
	return v
}

func TestViewIsTheClientAtTheClocksTime(t *testing.T) {
	g, clk := leader(t, fsm.BaseClusterVersion)
	spend(t, g, clk, "ann", 3)

	v := view(t, g, clk, "ann")
	assert.Equal(t, "ann", v.Client)
	assert.True(t, v.Known)
	assert.Equal(t, bucket.DefaultTierName, v.Tier)
	assert.Equal(t, basic, v.Policy)
	assert.Equal(t, clk.Now().UnixNano(), v.At)
	assert.Equal(t, int64(2*bucket.Scale), v.Decision.Remaining, "5 less the 3 taken")
	assert.True(t, v.Decision.Allowed)

	clk.Advance(2 * time.Second)
	later := view(t, g, clk, "ann")
	assert.Equal(t, clk.Now().UnixNano(), later.At)
	assert.Equal(t, int64(4*bucket.Scale), later.Decision.Remaining, "two seconds refilled two tokens")
	assert.Equal(t, later, view(t, g, clk, "ann"), "a view takes nothing")

	bob := view(t, g, clk, "bob")
	assert.False(t, bob.Known)
	assert.Equal(t, basic.Capacity*bucket.Scale, bob.Decision.Remaining, "a client never seen is full")
}

// View and SetTier run only at the group's leader: a replica that does not
// serve the group answers not-leader, which the node retries at the leader.
func TestClientOpsAtAReplicaThatDoesNotLeadAnswerNotLeader(t *testing.T) {
	g := raftgrouptest.Waiting(t, "0", 0)
	clk := clock.NewManual()
	_, err := View(ctx(t), g, clk, "ann")
	assert.ErrorIs(t, err, errs.ErrNotLeader)
	assert.ErrorIs(t, SetTier(ctx(t), g, clk, "ann", "pro", "ops"), errs.ErrNotLeader)
}

func TestSetTierAssignsAndRemovesTheClientsTier(t *testing.T) {
	g, clk := leader(t, fsm.BaseClusterVersion)

	require.NoError(t, SetTier(ctx(t), g, clk, "ann", "pro", "ops"))
	v := view(t, g, clk, "ann")
	assert.Equal(t, "pro", v.AssignedTier)
	assert.Equal(t, "pro", v.Tier)
	assert.Equal(t, pro, v.Policy)
	assert.Zero(t, v.Record, "below the audit version nothing records who did it")

	require.NoError(t, SetTier(ctx(t), g, clk, "ann", "gold", "ops"))
	v = view(t, g, clk, "ann")
	assert.Equal(t, "gold", v.AssignedTier, "the tier need not exist")
	assert.Equal(t, bucket.DefaultTierName, v.Tier, "until it does, the default applies")

	require.NoError(t, SetTier(ctx(t), g, clk, "ann", "", "ops"))
	v = view(t, g, clk, "ann")
	assert.Empty(t, v.AssignedTier, "an empty tier removes the assignment")
	assert.Equal(t, basic, v.Policy)
}

func TestSetTierRecordsWhoAndWhenFromTheAuditVersion(t *testing.T) {
	g, clk := leader(t, fsm.ClusterVersionAudit)
	clk.Advance(time.Minute)

	require.NoError(t, SetTier(ctx(t), g, clk, "ann", "pro", "ops"))
	rec := view(t, g, clk, "ann").Record
	assert.Equal(t, fsm.Act{At: clk.Now().UnixNano(), By: "ops"}, rec.Assigned)
	assert.Equal(t, "pro", rec.AssignedTier)

	clk.Advance(time.Minute)
	require.NoError(t, SetTier(ctx(t), g, clk, "ann", "", ""))
	rec = view(t, g, clk, "ann").Record
	assert.Equal(t, fsm.Act{At: clk.Now().UnixNano(), By: fsm.Anonymous}, rec.Assigned, "no actor: anonymous")
	assert.Empty(t, rec.AssignedTier)
}

// The stamp an operator's change carries is only recorded: a leader whose
// clock runs an hour ahead refills no bucket by it.
func TestAChangesStampMovesNoGroupTime(t *testing.T) {
	g, clk := leader(t, fsm.ClusterVersionAudit)
	spend(t, g, clk, "ann", basic.Capacity)
	before := g.FSM.HighWater()
	ahead := clock.NewManual()
	ahead.Advance(time.Hour)

	require.NoError(t, SetTier(ctx(t), g, ahead, "bob", "pro", "ops"))
	_, err := Reset(ctx(t), g, ahead, "cat", "ops")
	require.NoError(t, err)

	assert.Equal(t, before, g.FSM.HighWater())
	assert.Zero(t, view(t, g, clk, "ann").Decision.Remaining, "ann's bucket is still empty at the group's time")
	assert.Equal(t, ahead.Now().UnixNano(), view(t, g, clk, "bob").Record.Assigned.At, "while the stamp is what the leader's clock said")
}

func TestSetTierRefusesBadInput(t *testing.T) {
	g, clk := leader(t, fsm.ClusterVersionAudit)
	for name, tc := range map[string]struct {
		client, tier, actor string
		want                error // nil: valid
	}{
		"no client":     {"", "pro", "ops", fsm.ErrInvalidCommand},
		"a long client": {strings.Repeat("c", fsm.MaxClientLen+1), "pro", "ops", fsm.ErrInvalidCommand},
		"a long tier":   {"ann", strings.Repeat("t", bucket.MaxTierNameLen+1), "ops", bucket.ErrInvalidTierName},
		"a long actor":  {"ann", "pro", strings.Repeat("a", fsm.MaxActorLen+1), fsm.ErrInvalidCommand},
		"at the limits": {strings.Repeat("c", fsm.MaxClientLen), strings.Repeat("t", bucket.MaxTierNameLen), strings.Repeat("a", fsm.MaxActorLen), nil},
	} {
		t.Run(name, func(t *testing.T) {
			applied := g.FSM.AppliedIndex()
			err := SetTier(ctx(t), g, clk, tc.client, tc.tier, tc.actor)
			if tc.want == nil {
				assert.NoError(t, err)
				assert.Equal(t, tc.tier, view(t, g, clk, tc.client).AssignedTier)
				return
			}
			assert.ErrorIs(t, err, tc.want)
			assert.Equal(t, applied, g.FSM.AppliedIndex(), "nothing proposed")
		})
	}
}

func TestAuditedIsWhoAndWhenFromTheAuditVersion(t *testing.T) {
	g, clk := leader(t, fsm.BaseClusterVersion)
	assert.Zero(t, Audited(g, clk, "ops"), "the release before must read the entry: no stamp, no actor")

	apply(t, g, fsm.SetClusterVersion{Version: fsm.ClusterVersionAudit})
	assert.Equal(t, fsm.Audited{Stamp: clk.Now().UnixNano(), Actor: "ops"}, Audited(g, clk, "ops"))
	clk.Advance(time.Second)
	assert.Equal(t, fsm.Audited{Stamp: clk.Now().UnixNano(), Actor: fsm.Anonymous}, Audited(g, clk, ""))
}

func TestResetForgetsTheBucketAndKeepsTheTier(t *testing.T) {
	g, clk := leader(t, fsm.ClusterVersionPolicies)
	require.NoError(t, SetTier(ctx(t), g, clk, "ann", "pro", "ops"))
	spend(t, g, clk, "ann", 30)
	require.Equal(t, int64(70*bucket.Scale), view(t, g, clk, "ann").Decision.Remaining)
	clk.Advance(time.Millisecond)

	existed, err := Reset(ctx(t), g, clk, "ann", "ops")
	require.NoError(t, err)
	assert.True(t, existed)
	v := view(t, g, clk, "ann")
	assert.False(t, v.Known)
	assert.Equal(t, pro.Capacity*bucket.Scale, v.Decision.Remaining, "full again")
	assert.Equal(t, "pro", v.AssignedTier, "the assignment stays")
	assert.Equal(t, fsm.Act{At: clk.Now().UnixNano(), By: "ops"}, v.Record.Reset)

	existed, err = Reset(ctx(t), g, clk, "ann", "")
	require.NoError(t, err)
	assert.False(t, existed, "reset twice is reset once")
	assert.Equal(t, fsm.Anonymous, view(t, g, clk, "ann").Record.Reset.By)
	existed, err = Reset(ctx(t), g, clk, "bob", "ops")
	require.NoError(t, err)
	assert.False(t, existed, "a client never seen")
}

func TestResetIsRefusedBelowTheClusterVersionOfPolicies(t *testing.T) {
	g, clk := leader(t, fsm.BaseClusterVersion)
	spend(t, g, clk, "ann", 3)
	applied := g.FSM.AppliedIndex()

	_, err := Reset(ctx(t), g, clk, "ann", "ops")
	assert.ErrorIs(t, err, errs.ErrClusterVersion, "a replica of the release before could not apply it")
	assert.True(t, g.FSM.Known("ann"))
	assert.Equal(t, applied, g.FSM.AppliedIndex(), "nothing proposed")
}

func TestResetRefusesBadInput(t *testing.T) {
	g, clk := leader(t, fsm.ClusterVersionAudit)
	for name, tc := range map[string]struct{ client, actor string }{
		"no client":     {"", "ops"},
		"a long client": {strings.Repeat("c", fsm.MaxClientLen+1), "ops"},
		"a long actor":  {"ann", strings.Repeat("a", fsm.MaxActorLen+1)},
	} {
		t.Run(name, func(t *testing.T) {
			applied := g.FSM.AppliedIndex()
			_, err := Reset(ctx(t), g, clk, tc.client, tc.actor)
			assert.ErrorIs(t, err, fsm.ErrInvalidCommand)
			assert.Equal(t, applied, g.FSM.AppliedIndex(), "nothing proposed")
		})
	}
}

// serve serves Handle's RPCs on loopback, clients named "away..." in a
// group this node does not lead, and returns a caller of them.
func serve(t *testing.T, g *raftgroup.Group, clk clock.Clock) func(path string, req peerrpc.ClientReq, out any) error {
	away := raftgrouptest.Waiting(t, "1", 1)
	mux := http.NewServeMux()
	Handle(mux, func(client string) *raftgroup.Group {
		if strings.HasPrefix(client, "away") {
			return away
		}
		return g
	}, clk)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	rpc := &peerrpc.Client{HTTP: srv.Client()}
	addr := srv.Listener.Addr().String()
	return func(path string, req peerrpc.ClientReq, out any) error {
		var err error
		switch out := out.(type) {
		case *peerrpc.WireClientView:
			*out, err = peerrpc.Call[peerrpc.WireClientView](ctx(t), rpc, addr, path, req)
		case *bool:
			*out, err = peerrpc.Call[bool](ctx(t), rpc, addr, path, req)
		default:
			_, err = peerrpc.Call[struct{}](ctx(t), rpc, addr, path, req)
		}
		return err
	}
}

func TestHandleServesTheClientOpsToPeers(t *testing.T) {
	g, clk := leader(t, fsm.ClusterVersionAudit)
	spend(t, g, clk, "ann", 2)
	call := serve(t, g, clk)

	require.NoError(t, call("/internal/set-tier", peerrpc.ClientReq{Client: "ann", Tier: "pro", Actor: "ops"}, nil))
	var w peerrpc.WireClientView
	require.NoError(t, call("/internal/client", peerrpc.ClientReq{Client: "ann"}, &w))
	v := w.View()
	assert.Equal(t, "pro", v.AssignedTier)
	assert.True(t, v.Known)
	assert.Equal(t, fsm.Act{At: clk.Now().UnixNano(), By: "ops"}, v.Record.Assigned, "the actor crossed the wire")
	assert.Equal(t, view(t, g, clk, "ann"), v, "what View says at the leader")

	var existed bool
	require.NoError(t, call("/internal/reset-client", peerrpc.ClientReq{Client: "ann", Actor: "ops"}, &existed))
	assert.True(t, existed)
	assert.False(t, g.FSM.Known("ann"))
	assert.Equal(t, fsm.Act{At: clk.Now().UnixNano(), By: "ops"}, view(t, g, clk, "ann").Record.Reset)
}

func TestHandleAnswersPeersWithTheNodesErrors(t *testing.T) {
	g, clk := leader(t, fsm.BaseClusterVersion)
	call := serve(t, g, clk)

	var w peerrpc.WireClientView
	assert.ErrorIs(t, call("/internal/client", peerrpc.ClientReq{Client: "away-ann"}, &w), errs.ErrNotLeader, "retried at the leader")
	assert.ErrorIs(t, call("/internal/set-tier", peerrpc.ClientReq{Client: "away-ann", Tier: "pro"}, nil), errs.ErrNotLeader)
	assert.ErrorIs(t, call("/internal/set-tier", peerrpc.ClientReq{Client: "", Tier: "pro"}, nil), fsm.ErrInvalidCommand)

	var existed bool
	assert.ErrorIs(t, call("/internal/reset-client", peerrpc.ClientReq{Client: "ann"}, &existed), errs.ErrClusterVersion)
	err := call("/internal/reset-client", peerrpc.ClientReq{Client: ""}, &existed)
	assert.ErrorIs(t, err, fsm.ErrInvalidCommand, "bad input is bad at any version")
	assert.NotErrorIs(t, err, errs.ErrClusterVersion)
}

// A replica that does not lead, and has not applied the group's
// SetClusterVersion (a deposed leader that lags, still named by a stale
// route), answers not-leader, which route.AtLeader retries at the leader,
// and not its own lagging cluster version, which it would not: peerrpc's
// handlers answer "not_leader" for every group the node does not serve.
func TestResetAtAReplicaThatDoesNotLeadAnswersNotLeader(t *testing.T) {
	g := raftgrouptest.Waiting(t, "0", 0)
	_, err := Reset(ctx(t), g, clock.NewManual(), "ann", "ops")
	assert.ErrorIs(t, err, errs.ErrNotLeader)
	assert.NotErrorIs(t, err, errs.ErrClusterVersion)
}

// A peer's request is checked like a caller's (CheckSetTier, which
// cluster.Node.SetClientTier runs too): a tier name bucket.ValidateTierName
// refuses and, at any cluster version, an actor past fsm.MaxActorLen (below
// the audit version the actor is not recorded, yet still checked), so a
// peer's /internal/set-tier assigns nothing a caller could not.
func TestSetTierChecksAPeersRequestLikeACallers(t *testing.T) {
	g, clk := leader(t, fsm.BaseClusterVersion)
	for _, tier := range []string{"Not A Tier", bucket.DefaultTierName} {
		require.Error(t, bucket.ValidateTierName(tier), "a caller's tier name check refuses %q", tier)
		assert.Error(t, SetTier(ctx(t), g, clk, "ann", tier, "ops"), "tier %q", tier)
		assert.Empty(t, view(t, g, clk, "ann").AssignedTier, "tier %q assigned", tier)
	}
	long := strings.Repeat("a", fsm.MaxActorLen+1)
	require.Error(t, fsm.Validate(fsm.SetTier{Client: "bob", Tier: "pro", Audited: fsm.Audited{Actor: long}}), "a caller's check refuses the actor")
	assert.Error(t, SetTier(ctx(t), g, clk, "bob", "pro", long))
}
