package placer

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/raftgroup/raftgrouptest"
	"github.com/quorate/quorate/cluster/status"
	"github.com/quorate/quorate/fsm"
)

// raftgrouptest starts node n1 alone, on a transport nothing else reaches;
// the placer moves voters and leaders between nodes, so most tests here
// need a group that spans nodes. span starts one: a real raftgroup.Group
// per node, on raft's in-memory transports joined to each other.

// replica is one node's replica of a group.
type replica struct {
	node  string
	trans *raft.InmemTransport
	g     *raftgroup.Group
}

// raftAddr is node id's raft address, the same for all its groups (each
// group's in-memory transport maps it to that node's replica of the group).
// It differs from the id, so a placer that confused the two would fail.
func raftAddr(id string) string { return "inmem-" + id }

// span starts group id on nodes: nodes[0] bootstraps it as its only voter
// and serves it; the others wait to be added.
func span(t *testing.T, id string, nodes ...string) map[string]*replica {
	t.Helper()
	rs := map[string]*replica{}
	for _, n := range nodes {
		_, trans := raft.NewInmemTransport(raft.ServerAddress(raftAddr(n)))
		rs[n] = &replica{node: n, trans: trans}
	}
	for _, a := range rs {
		for _, b := range rs {
			if a != b {
				a.trans.Connect(b.trans.LocalAddr(), b.trans)
			}
		}
	}
	for i, n := range nodes {
		rs[n].g = raftgrouptest.Open(t, raftgroup.Config{ID: id, Bootstrap: i == 0, NodeID: n,
			Addr: rs[n].trans.LocalAddr(), Trans: rs[n].trans})
	}
	require.Eventually(t, rs[nodes[0]].g.Serving, 10*time.Second, 5*time.Millisecond, "group %s never served on %s", id, nodes[0])
	return rs
}

// join makes nodes voters of rs's group at its leader, as earlier
// placement rounds would have, and waits until each holds the log. (Raft
// commits the change that adds a voter to a one-voter group on the
// leader's vote alone, before the new voter has any entry; a transfer to it
// then would fail.)
func join(t *testing.T, rs map[string]*replica, leader string, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		f := rs[leader].g.Raft.AddVoter(raft.ServerID(n), raft.ServerAddress(raftAddr(n)), 0, 5*time.Second)
		require.NoError(t, f.Error())
		require.Eventually(t, func() bool { return rs[n].g.Raft.AppliedIndex() >= f.Index() }, 10*time.Second, time.Millisecond,
			"%s never caught up", n)
	}
}

func voters(g *raftgroup.Group) []string {
	f := g.Raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	return raftgroup.VoterIDs(f.Configuration())
}

// leads waits until node's replica serves the group, and the others' do not.
func leads(t *testing.T, rs map[string]*replica, node string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for n, r := range rs {
			if r.g.Serving() != (n == node) {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "%s never took over", node)
}

// groupIDs returns k group ids whose rendezvous order over nodes
// satisfies want, so that a test can pick who is preferred.
func groupIDs(t *testing.T, k int, want func(order []string) bool, nodes ...string) []string {
	t.Helper()
	var ids []string
	for i := 0; i < 1000 && len(ids) < k; i++ {
		if id := strconv.Itoa(i); want(membership.Rendezvous(id, nodes)) {
			ids = append(ids, id)
		}
	}
	require.Len(t, ids, k, "group ids among 1000 with the rendezvous order wanted over %v", nodes)
	return ids
}

func groupID(t *testing.T, want func(order []string) bool, nodes ...string) string {
	t.Helper()
	return groupIDs(t, 1, want, nodes...)[0]
}

func first(id string) func([]string) bool { return func(o []string) bool { return o[0] == id } }

// record is one log record of a placer.
type record struct {
	level slog.Level
	attrs map[string]string
}

// recorder keeps a placer's log records.
type recorder struct {
	mu   sync.Mutex
	recs []record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	attrs := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, record{level: rec.Level, attrs: attrs})
	return nil
}

// about returns the records at level that have every attribute of kv
// (key, value, key, value...).
func (r *recorder) about(level slog.Level, kv ...string) []record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []record
	for _, rec := range r.recs {
		ok := rec.level == level
		for i := 0; ok && i+1 < len(kv); i += 2 {
			ok = rec.attrs[kv[i]] == kv[i+1]
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out
}

// cluster is what every node's gossip says of the nodes, and each node's
// own state, that a test's placers are given.
type cluster struct {
	members  map[string]membership.Member // every node, by id
	leaving  map[string]bool
	clockOff map[string]bool
	silent   map[string]bool // nodes whose raft has not answered lately (Config.Reached)
	version  uint32          // every node's cluster version
	clock    *clock.Manual   // the placers' Now, from clock.ManualStart
}

func newCluster(nodes ...string) *cluster {
	c := &cluster{members: map[string]membership.Member{}, leaving: map[string]bool{}, clockOff: map[string]bool{}, silent: map[string]bool{}, version: fsm.BaseClusterVersion,
		clock: clock.NewManual()}
	for _, n := range nodes {
		c.members[n] = membership.Member{State: membership.Alive, Since: c.clock.Now(),
			Meta: membership.Meta{ID: n, RaftAddr: raftAddr(n), MaxClusterVersion: fsm.MaxClusterVersion}}
	}
	return c
}

// set changes what gossip says of node n.
func (c *cluster) set(n string, change func(*membership.Member)) {
	m := c.members[n]
	change(&m)
	c.members[n] = m
}

// placer is node self's placer over its replicas of groups, keeping
// replicas voters per group.
func (c *cluster) placer(self string, replicas int, groups ...map[string]*replica) (*Placer, *recorder) {
	log := &recorder{}
	var gs []*raftgroup.Group
	for _, rs := range groups {
		gs = append(gs, rs[self].g)
	}
	return New(Config{
		Self: self, SelfAddr: raftAddr(self), Replicas: replicas, DeadAfter: time.Minute,
		Members: func() map[string]membership.Member {
			out := map[string]membership.Member{}
			for id, m := range c.members {
				if id != self {
					out[id] = m
				}
			}
			return out
		},
		Groups:         func() []*raftgroup.Group { return gs },
		ClockOff:       func() bool { return c.clockOff[self] },
		Leaving:        func() bool { return c.leaving[self] },
		ClusterVersion: func() uint32 { return c.version },
		Reached: func(addr string) bool {
			for id, m := range c.members {
				if m.Meta.RaftAddr == addr {
					return !c.silent[id]
				}
			}
			return addr == raftAddr(self)
		},
		Logger: slog.New(log),
		Now:    c.clock.Now,
	}), log
}

func TestPlacerAddsOneMissingVoterPerRound(t *testing.T) {
	id := groupID(t, first("n1"), "n1", "n2", "n3") // n1 stays the preferred leader throughout
	rs := span(t, id, "n1", "n2", "n3")
	p, _ := newCluster("n1", "n2", "n3").placer("n1", 3, rs)

	p.Place()
	after1 := voters(rs["n1"].g)
	assert.Len(t, after1, 2, "one step per group and round")
	assert.Contains(t, after1, "n1")

	p.Place()
	assert.Equal(t, []string{"n1", "n2", "n3"}, voters(rs["n1"].g))
	for _, n := range []string{"n2", "n3"} {
		assert.Eventually(t, func() bool { return rs[n].g.IsVoter(n) }, 10*time.Second, 5*time.Millisecond,
			"%s's replica learns it votes: it was added at its raft address", n)
	}

	p.Place()
	assert.Equal(t, []string{"n1", "n2", "n3"}, voters(rs["n1"].g), "placed: nothing more to do")
	assert.True(t, rs["n1"].g.Serving())
	assert.Equal(t, uint64(3), p.Rounds())
}

// A round takes a step in every group the node serves, and none in a group
// it does not.
func TestPlacerStepsEveryGroupItServesInOneRound(t *testing.T) {
	// Each group's first step is to add n2, whoever is preferred to lead it.
	a, b := span(t, "0", "n1", "n2"), span(t, "1", "n1", "n2")
	elsewhere := span(t, "elsewhere", "n2", "n1") // led by n2; n1 waits to be added
	p, log := newCluster("n1", "n2").placer("n1", 2, a, b, elsewhere)

	p.Place()
	assert.Equal(t, []string{"n1", "n2"}, voters(a["n1"].g))
	assert.Equal(t, []string{"n1", "n2"}, voters(b["n1"].g))
	assert.Equal(t, []string{"n2"}, voters(elsewhere["n2"].g))
	assert.Empty(t, log.about(slog.LevelInfo, "group", "elsewhere"), "no step in a group n1 does not serve")
	assert.Empty(t, log.about(slog.LevelWarn, "group", "elsewhere"))
}

func TestPlacerAddsNoVoterWhoseBinaryCannotRunTheClusterVersion(t *testing.T) {
	require.Less(t, fsm.ClusterVersionPolicies, fsm.MaxClusterVersion, "this test needs a version above the group's")
	rs := span(t, groupID(t, first("n1"), "n1", "n2"), "n1", "n2")
	c := newCluster("n1", "n2")
	p, log := c.placer("n1", 2, rs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := rs["n1"].g.ApplyLocal(ctx, fsm.SetClusterVersion{Version: fsm.ClusterVersionPolicies})
	require.NoError(t, err)

	// The group's version counts: a binary from before cluster versions
	// runs only the base.
	c.set("n2", func(m *membership.Member) { m.Meta.MaxClusterVersion = 0 })
	p.Place()
	assert.Equal(t, []string{"n1"}, voters(rs["n1"].g))
	assert.Len(t, log.about(slog.LevelWarn, "voter", "n2", "cluster_version", strconv.Itoa(int(fsm.ClusterVersionPolicies))), 1, "the refusal is logged")

	// So does the node's, when it is the higher.
	c.set("n2", func(m *membership.Member) { m.Meta.MaxClusterVersion = fsm.ClusterVersionPolicies })
	c.version = fsm.MaxClusterVersion
	p.Place()
	assert.Equal(t, []string{"n1"}, voters(rs["n1"].g))
	assert.Len(t, log.about(slog.LevelWarn, "voter", "n2", "cluster_version", strconv.Itoa(int(fsm.MaxClusterVersion))), 1)

	c.set("n2", func(m *membership.Member) { m.Meta.MaxClusterVersion = fsm.MaxClusterVersion })
	p.Place()
	assert.Equal(t, []string{"n1", "n2"}, voters(rs["n1"].g), "upgraded, it is added")
}

func TestPlacerRemovesVotersThatLeftOrDiedLongAgo(t *testing.T) {
	for name, tc := range map[string]struct {
		gone    func(*membership.Member)
		removed bool
	}{
		"left":    {func(m *membership.Member) { m.State = membership.Left }, true},
		"leaving": {func(m *membership.Member) { m.Meta.Leaving = true }, true},
		// The placers' DeadAfter is a minute, their clock at ManualStart.
		"dead a minute": {func(m *membership.Member) { m.State, m.Since = membership.Dead, clock.ManualStart.Add(-time.Minute) }, true},
		"dead just under a minute": {func(m *membership.Member) {
			m.State, m.Since = membership.Dead, clock.ManualStart.Add(-time.Minute+time.Millisecond)
		}, false},
	} {
		t.Run(name, func(t *testing.T) {
			rs := span(t, groupID(t, first("n1"), "n1", "n2", "n3"), "n1", "n2", "n3")
			join(t, rs, "n1", "n2", "n3")
			c := newCluster("n1", "n2", "n3")
			c.set("n3", tc.gone)
			p, _ := c.placer("n1", 3, rs)

			p.Place()
			if tc.removed {
				assert.Equal(t, []string{"n1", "n2"}, voters(rs["n1"].g))
			} else {
				assert.Equal(t, []string{"n1", "n2", "n3"}, voters(rs["n1"].g), "it may come back within DeadAfter")
			}
			assert.True(t, rs["n1"].g.Serving())
		})
	}
}

func TestPlacerKeepsAVoterWhoseRemovalWouldLoseTheLiveMajority(t *testing.T) {
	rs := span(t, groupID(t, first("n1"), "n1", "n2", "n3"), "n1", "n2", "n3")
	join(t, rs, "n1", "n2", "n3")
	c := newCluster("n1", "n2", "n3")
	c.set("n2", func(m *membership.Member) { m.State = membership.Left })
	c.set("n3", func(m *membership.Member) { m.State = membership.Dead }) // lately: not removable, not live
	p, log := c.placer("n1", 3, rs)

	p.Place()
	assert.Equal(t, []string{"n1", "n2", "n3"}, voters(rs["n1"].g), "n1 and a dead n3 are no live majority")
	assert.Len(t, log.about(slog.LevelWarn, "voter", "n2"), 1, "the refusal is logged")

	c.set("n3", func(m *membership.Member) { m.State = membership.Alive })
	p.Place()
	assert.Equal(t, []string{"n1", "n3"}, voters(rs["n1"].g))
}

func TestPlacerTrimsAVoterBeyondTheReplicaCount(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	id := groupID(t, first("n1"), nodes...)
	rs := span(t, id, nodes...)
	join(t, rs, "n1", "n2", "n3")
	p, _ := newCluster(nodes...).placer("n1", 2, rs)

	p.Place()
	order := membership.Rendezvous(id, nodes) // the first two are the group's preferred replicas
	assert.ElementsMatch(t, order[:2], voters(rs["n1"].g), "the voter that is not preferred goes")
	assert.True(t, rs["n1"].g.Serving())
}

// Leaders spread: of four groups n1 leads, two rank n2 first and two n1,
// and one round hands n2 the group each should lead so that both nodes
// lead two; the rest stay with n1.
func TestPlacerMovesLeadershipToThePreferredLeader(t *testing.T) {
	nodes := []string{"n1", "n2"}
	ids := append(groupIDs(t, 2, first("n2"), nodes...), groupIDs(t, 2, first("n1"), nodes...)...)
	var groups []map[string]*replica
	for _, id := range ids {
		rs := span(t, id, nodes...)
		join(t, rs, "n1", "n2")
		groups = append(groups, rs)
	}
	p, log := newCluster(nodes...).placer("n1", 2, groups...)
	preferred := membership.PreferredLeaders(ids, nodes, 2)
	require.Equal(t, "n2", preferred[ids[0]], "a group that ranks n2 first moves")
	require.Equal(t, "n2", preferred[ids[3]], "and so does one that ranks n1 first, as n1 has its share")

	p.Place()
	led := map[string]int{}
	for i, rs := range groups {
		leads(t, rs, preferred[ids[i]])
		led[preferred[ids[i]]]++
		if preferred[ids[i]] == "n2" {
			assert.Len(t, log.about(slog.LevelInfo, "group", ids[i], "to", "n2"), 1)
		}
	}
	assert.Equal(t, map[string]int{"n1": 2, "n2": 2}, led)

	p.Place()
	for i, rs := range groups {
		if preferred[ids[i]] == "n1" {
			assert.True(t, rs["n1"].g.Serving())
			assert.Empty(t, log.about(slog.LevelInfo, "group", ids[i]), "no step for a placed group")
		}
	}
}

// A target that cannot take over is not asked again at once.
func TestPlacerTransfersAGroupAtMostOnceInAFewSeconds(t *testing.T) {
	rs := span(t, groupID(t, first("n2"), "n1", "n2", "n3"), "n1", "n2", "n3")
	join(t, rs, "n1", "n2", "n3")
	// n2 is cut off, but gossip has not noticed: n1 and n3 still make a majority.
	rs["n2"].trans.DisconnectAll()
	rs["n1"].trans.Disconnect(rs["n2"].trans.LocalAddr())
	rs["n3"].trans.Disconnect(rs["n2"].trans.LocalAddr())
	c := newCluster("n1", "n2", "n3")
	p, log := c.placer("n1", 3, rs)

	p.Place()
	require.Len(t, log.about(slog.LevelInfo, "to", "n2"), 1, "a transfer to the preferred leader was tried")
	assert.Len(t, log.about(slog.LevelWarn, "to", "n2"), 1, "and failed")
	require.True(t, rs["n1"].g.Serving(), "n1 still leads")

	p.Place()
	c.clock.Advance(transferEvery - time.Millisecond)
	p.Place()
	assert.Len(t, log.about(slog.LevelInfo, "to", "n2"), 1, "not tried again within the rounds that follow")
	assert.Len(t, log.about(slog.LevelWarn, "to", "n2"), 1)
	assert.Equal(t, uint64(3), p.Rounds())

	c.clock.Advance(time.Millisecond)
	p.Place()
	assert.Len(t, log.about(slog.LevelInfo, "to", "n2"), 2, "tried again once a few seconds have passed")
}

func TestAPlacerWhoseClockIsOffHandsItsLeadershipOver(t *testing.T) {
	rs := span(t, groupID(t, first("n1"), "n1", "n2"), "n1", "n2")
	join(t, rs, "n1", "n2")
	c := newCluster("n1", "n2")
	p, log := c.placer("n1", 2, rs)

	p.Place()
	assert.True(t, rs["n1"].g.Serving(), "n1 is the preferred leader")

	c.clockOff["n1"] = true
	c.set("n2", func(m *membership.Member) { m.Meta.ClockOff = true })
	p.Place()
	assert.True(t, rs["n1"].g.Serving(), "no node's clock is better: n1 keeps it")
	assert.Empty(t, log.about(slog.LevelInfo, "to", "n2"))

	c.set("n2", func(m *membership.Member) { m.Meta.ClockOff = false })
	p.Place()
	leads(t, rs, "n2")
}

// A leader that is not among its group's preferred replicas hands the
// group to one that is, whose placer then removes it.
func TestASurplusLeaderHandsOverAndTheNewLeaderRemovesIt(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	id := groupID(t, func(o []string) bool { return o[2] == "n1" }, nodes...)
	order := membership.Rendezvous(id, nodes)
	rs := span(t, id, nodes...)
	join(t, rs, "n1", "n2", "n3")
	c := newCluster(nodes...)
	p1, _ := c.placer("n1", 2, rs)

	p1.Place()
	leads(t, rs, order[0])
	assert.Equal(t, nodes, voters(rs[order[0]].g), "n1 does not remove another preferred replica, nor itself")

	next, _ := c.placer(order[0], 2, rs)
	next.Place()
	assert.ElementsMatch(t, order[:2], voters(rs[order[0]].g))
}

func TestALeavingPlacerHandsItsGroupToALiveVoterAndChangesNothingElse(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4"}
	rs := span(t, groupID(t, first("n1"), nodes...), nodes...)
	join(t, rs, "n1", "n2", "n3")
	c := newCluster(nodes...)
	c.set("n2", func(m *membership.Member) { m.State = membership.Dead }) // lately: kept, but not live
	c.leaving["n1"] = true
	p, _ := c.placer("n1", 3, rs)

	// Staying, n1 would add n4, a preferred replica; leaving, it only hands over.
	p.Place()
	leads(t, rs, "n3")
	assert.Equal(t, []string{"n1", "n2", "n3"}, voters(rs["n3"].g))
}

// Gossip keeps a paused or cut-off node alive for seconds; a transfer to it
// would stop the group's proposals for an election timeout and fail.
func TestPlacerMovesLeadershipOnlyToAVoterThatAnsweredLately(t *testing.T) {
	rs := span(t, groupID(t, first("n2"), "n1", "n2", "n3"), "n1", "n2", "n3")
	join(t, rs, "n1", "n2", "n3")
	c := newCluster("n1", "n2", "n3")
	c.silent["n2"] = true
	p, log := c.placer("n1", 3, rs)

	p.Place()
	assert.Empty(t, log.about(slog.LevelInfo, "to", "n2"), "no transfer to a voter that has not answered")
	assert.True(t, rs["n1"].g.Serving())

	c.silent["n2"] = false
	p.Place()
	leads(t, rs, "n2")
	assert.Len(t, log.about(slog.LevelInfo, "to", "n2"), 1, "moved once it answers")
}

func TestALeavingPlacerPrefersAVoterThatAnsweredLately(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	rs := span(t, groupID(t, first("n1"), nodes...), nodes...)
	join(t, rs, "n1", "n2", "n3")
	c := newCluster(nodes...)
	c.silent["n2"] = true // listed before n3 among the voters
	c.leaving["n1"] = true
	p, _ := c.placer("n1", 3, rs)
	require.Equal(t, []string{"n1", "n2", "n3"}, voters(rs["n1"].g))

	p.Place()
	leads(t, rs, "n3")
}

// serveGroups serves every node's /internal/groups over its replicas of
// groups on loopback, as a node's rpc handler does, and returns where each
// node answers.
func serveGroups(t *testing.T, groups ...map[string]*replica) func(node string) string {
	t.Helper()
	addrs := map[string]string{}
	for n := range groups[0] {
		mux := http.NewServeMux()
		peerrpc.Handle(mux, "/internal/groups", func(context.Context, struct{}) ([]peerrpc.WireGroupStatus, error) {
			var gs []*raftgroup.Group
			for _, rs := range groups {
				if r, ok := rs[n]; ok {
					gs = append(gs, r.g)
				}
			}
			return status.Groups(gs), nil
		})
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		addrs[n] = srv.Listener.Addr().String()
	}
	return func(node string) string { return addrs[node] }
}

// leaderOf is node self's view of who leads a group (as its router would
// say, from raft or gossip): itself, or the node whose replica serves it,
// at that node's rpc address.
func leaderOf(self string, rpcAddr func(string) string, groups ...map[string]*replica) func(*raftgroup.Group) (bool, string) {
	return func(g *raftgroup.Group) (bool, string) {
		for _, rs := range groups {
			if rs[self].g != g {
				continue
			}
			for n, r := range rs {
				switch {
				case r.g.Serving() && n == self:
					return true, ""
				case r.g.Serving():
					return false, rpcAddr(n)
				}
			}
		}
		return false, ""
	}
}

func rpcClient() *peerrpc.Client {
	return &peerrpc.Client{HTTP: &http.Client{Timeout: 5 * time.Second}}
}

func TestRemovedEverywhereAsksEachLeaderWhetherItStillCountsTheNode(t *testing.T) {
	rs := span(t, "0", "n2", "n1")
	join(t, rs, "n2", "n1")
	addr := serveGroups(t, rs)
	members := newCluster("n2").members
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	removed := func(leaderOf func(*raftgroup.Group) (bool, string)) bool {
		return RemovedEverywhere(ctx, "n1", members, []*raftgroup.Group{rs["n1"].g}, leaderOf, rpcClient())
	}

	assert.False(t, removed(leaderOf("n1", addr, rs)), "n2 still counts n1 as a voter")
	require.NoError(t, rs["n2"].g.Raft.RemoveServer("n1", 0, 5*time.Second).Error())
	assert.True(t, removed(leaderOf("n1", addr, rs)), "n2 dropped it")

	// Now n2 would say n1 is gone, but n1 cannot know it when:
	assert.False(t, removed(func(*raftgroup.Group) (bool, string) { return true, addr("n2") }), "it leads: it has not handed over")
	assert.False(t, removed(func(*raftgroup.Group) (bool, string) { return false, "" }), "it knows no leader to ask")
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	assert.False(t, removed(func(*raftgroup.Group) (bool, string) { return false, gone.Listener.Addr().String() }), "the leader does not answer")
}

func TestRemovedEverywhereIsTrueForTheLastNode(t *testing.T) {
	g := raftgrouptest.Single(t, "0", 0)
	self := func(*raftgroup.Group) (bool, string) { return true, "" }
	ctx := context.Background()
	assert.True(t, RemovedEverywhere(ctx, "n1", nil, []*raftgroup.Group{g}, self, nil), "nobody to hand over to")

	members := newCluster("n2", "n3", "n4").members
	members["n2"] = membership.Member{State: membership.Dead}
	members["n3"] = membership.Member{State: membership.Left}
	members["n4"] = membership.Member{State: membership.Alive, Meta: membership.Meta{Leaving: true}}
	assert.True(t, RemovedEverywhere(ctx, "n1", members, []*raftgroup.Group{g}, self, nil), "nor among the dead and the leaving")

	members["n4"] = membership.Member{State: membership.Alive}
	assert.False(t, RemovedEverywhere(ctx, "n1", members, []*raftgroup.Group{g}, self, nil), "n4 could take it")
}

// The whole leave: n1 hands over the group it leads, n2 removes it from
// both groups, and WaitRemoved returns once n2 no longer counts it.
func TestALeavingNodeIsHandedOverAndRemovedEverywhere(t *testing.T) {
	a, b := span(t, "0", "n1", "n2"), span(t, "1", "n2", "n1")
	join(t, a, "n1", "n2")
	join(t, b, "n2", "n1")
	addr := serveGroups(t, a, b)
	c := newCluster("n1", "n2")
	c.leaving["n1"] = true
	c.set("n1", func(m *membership.Member) { m.Meta.Leaving = true }) // as n1 gossips it
	p1, _ := c.placer("n1", 2, a, b)
	p2, _ := c.placer("n2", 2, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	kicks := 0
	err := WaitRemoved(ctx, func(ctx context.Context) bool {
		return RemovedEverywhere(ctx, "n1", map[string]membership.Member{"n2": c.members["n2"]},
			[]*raftgroup.Group{a["n1"].g, b["n1"].g}, leaderOf("n1", addr, a, b), rpcClient())
	}, func() { kicks++; p1.Place(); p2.Place() })
	require.NoError(t, err)
	assert.Positive(t, kicks)
	for _, rs := range []map[string]*replica{a, b} {
		assert.True(t, rs["n2"].g.Serving())
		assert.Equal(t, []string{"n2"}, voters(rs["n2"].g))
	}
}

func TestWaitRemovedKicksPlacementUntilRemoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kicks, asked := 0, 0
	err := WaitRemoved(ctx, func(context.Context) bool { asked++; return kicks >= 2 }, func() { kicks++ })
	require.NoError(t, err)
	assert.Equal(t, 2, kicks)
	assert.Equal(t, 3, asked, "asked again after every kick")

	kicks = 0
	require.NoError(t, WaitRemoved(ctx, func(context.Context) bool { return true }, func() { kicks++ }))
	assert.Zero(t, kicks, "removed already: no round needed")
}

func TestWaitRemovedEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kicks := 0
	var seen []error
	err := WaitRemoved(ctx, func(ctx context.Context) bool { seen = append(seen, ctx.Err()); return false }, func() {
		kicks++
		if kicks == 2 {
			cancel()
		}
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 2, kicks)
	assert.Equal(t, []error{nil, nil, context.Canceled}, seen, "removed is asked with the caller's context")
}
