package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/raftport"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/transport/peertls/peertlstest"
	"github.com/quorate/quorate/transport/raftmux"
	"github.com/quorate/quorate/transport/raftnet"
)

func newGossipKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	_, err := rand.Read(k)
	require.NoError(t, err)
	return k
}

// newSecureTestCluster is newTestCluster with cluster TLS and an encrypted
// gossip on every node.
func newSecureTestCluster(t *testing.T, size int) *testCluster {
	tc := &testCluster{t: t, clock: clock.NewManual(), groups: 3, partition: &Partition{}, deadAfter: time.Hour,
		pki: peertlstest.Authority(t), gossipKeys: [][]byte{newGossipKey(t)}}
	for range size {
		tc.addNode()
	}
	tc.waitStable(size)
	return tc
}

// attacker is a raft port client of its own, as anyone who can reach the
// port could run: a Mux (with tls, or plain TCP as today's peers speak) on
// 127.0.0.35 with one layer.
func attacker(t *testing.T, mt *raftmux.TLS, layer string) *raftmux.Layer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.35:0")
	require.NoError(t, err)
	mux := raftmux.New(ln, raftmux.Options{TLS: mt})
	t.Cleanup(func() { _ = mux.Close() })
	l, err := mux.Layer(layer)
	require.NoError(t, err)
	return l
}

// forgeRequestVote sends target's meta group the review's forged vote:
// a newer term, on behalf of a configured voter, flagged as a leadership
// transfer so that the leader does not ignore it.
func forgeRequestVote(t *testing.T, mt *raftmux.TLS, target *Node) error {
	t.Helper()
	l := attacker(t, mt, raftport.RaftLayer)
	rn := raftnet.New(l, raft.ServerAddress(l.Addr().String()), raftnet.Options{Timeout: 2 * time.Second})
	defer rn.Close()
	trans, err := rn.Transport(raftgroup.MetaGroupID)
	require.NoError(t, err)
	term := target.meta.Raft.CurrentTerm()
	var resp raft.RequestVoteResponse
	return trans.RequestVote(raft.ServerID(target.opts.NodeID), raft.ServerAddress(target.RaftAddr()), &raft.RequestVoteRequest{
		RPCHeader:          raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(target.opts.NodeID), Addr: []byte(l.Addr().String())},
		Term:               term + 10,
		LastLogIndex:       1 << 40,
		LastLogTerm:        term + 10,
		LeadershipTransfer: true,
	}, &resp)
}

// TestForgedRequestVoteAndRPCNeedAClusterCertificate reproduces the
// review's finding on a node without cluster TLS (one forged RequestVote
// deposes the leader), then shows that a node with it refuses the same
// vote and internal RPCs from anyone without a certificate of its CA.
func TestForgedRequestVoteAndRPCNeedAClusterCertificate(t *testing.T) {
	t.Run("without cluster TLS the forged vote deposes the leader", func(t *testing.T) {
		n := startNode(t, t.TempDir(), clock.NewManual())
		term := n.meta.Raft.CurrentTerm()
		require.NoError(t, forgeRequestVote(t, nil, n))
		assert.GreaterOrEqual(t, n.meta.Raft.CurrentTerm(), term+10, "the forged term was taken")
	})

	ca := peertlstest.Authority(t)
	n := startNode(t, t.TempDir(), clock.NewManual(), func(o *Options) { o.TLS = peertlstest.Node(t, ca, "n1") })
	term := n.meta.Raft.CurrentTerm()
	other := peertlstest.Node(t, peertlstest.Authority(t), "n1") // a valid-looking certificate of another CA
	for name, mt := range map[string]*raftmux.TLS{
		"plain TCP":                 nil,
		"certificate of another CA": {Server: other.Server, Client: withoutServerCheck(other.Client)},
	} {
		t.Run(name, func(t *testing.T) {
			refused := n.mux.Stats().Refused[raftmux.ReasonTLS]
			assert.Error(t, forgeRequestVote(t, mt, n), "forged RequestVote")
			assert.Equal(t, term, n.meta.Raft.CurrentTerm(), "the leader kept its term")
			assert.True(t, n.meta.Serving(), "and its leadership")

			rpc := attacker(t, mt, peerrpc.LayerName)
			hc := &http.Client{Transport: &http.Transport{DialContext: rpc.DialContext}, Timeout: 2 * time.Second}
			_, err := peerrpc.Call[struct{}](ctx(t), &peerrpc.Client{HTTP: hc}, n.RaftAddr(), "/internal/set-tier", peerrpc.ClientReq{Client: "alice", Tier: "free"})
			assert.Error(t, err, "forged internal RPC")
			assert.Eventually(t, func() bool { return n.mux.Stats().Refused[raftmux.ReasonTLS] >= refused+2 },
				5*time.Second, time.Millisecond, "both refusals counted")
		})
	}
	v, err := n.Client(ctx(t), "alice")
	require.NoError(t, err)
	assert.Empty(t, v.AssignedTier, "the forged set-tier changed nothing")

	// A holder of a certificate of this CA is a peer: its RPC is served.
	peer := peertlstest.Node(t, ca, "n2")
	rpc := attacker(t, &raftmux.TLS{Server: peer.Server, Client: peer.Client}, peerrpc.LayerName)
	hc := &http.Client{Transport: &http.Transport{DialContext: rpc.DialContext}, Timeout: 2 * time.Second}
	_, err = peerrpc.Call[[]peerrpc.WireGroupStatus](ctx(t), &peerrpc.Client{HTTP: hc}, n.RaftAddr(), "/internal/groups", struct{}{})
	assert.NoError(t, err)
}

// withoutServerCheck lets a client of another CA reach the handshake's
// end, so that the test sees the server refuse it (not itself refuse the
// server).
func withoutServerCheck(c *tls.Config) *tls.Config {
	cc := c.Clone()
	cc.VerifyConnection = nil
	return cc
}

// fakeMember joins the cluster's gossip as node id, advertising raftAddr,
// with keys (none: plaintext). It is a real memberlist node that never
// runs raft.
func fakeMember(t *testing.T, tc *testCluster, id, raftAddr string, keys [][]byte) (*membership.Gossip, error) {
	t.Helper()
	m, err := membership.New(membership.Config{NodeID: id, RaftAddr: raftAddr, HTTPAddr: "127.0.0.36:1",
		GossipAddr: "127.0.0.36:0", Groups: tc.groups, Keys: keys, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown() })
	return m, m.Join(tc.gossip[:1])
}

// placementRounds waits until every live node has run two more placement
// rounds, so that whatever they would do about what they know now is done.
func (tc *testCluster) placementRounds() {
	tc.t.Helper()
	start := map[*Node]uint64{}
	for _, n := range tc.live() {
		start[n] = n.placer.Rounds()
		kick(n.placementCh)
	}
	require.Eventually(tc.t, func() bool {
		for n, s := range start {
			if n.placer.Rounds() < s+2 {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
}

// requireVoters checks that every group's leader lists exactly want.
func (tc *testCluster) requireVoters(want ...string) {
	tc.t.Helper()
	slices.Sort(want)
	for _, n := range tc.live() {
		for _, g := range n.allGroups() {
			if g.Serving() {
				assert.Equal(tc.t, want, raftgroup.VoterIDs(g.Raft.GetConfiguration().Configuration()), "group %s led by %s", g.ID, n.opts.NodeID)
			}
		}
	}
}

// TestFakeGossipMemberNeverBecomesAVoter reproduces the review's fake
// member: gossip metadata alone used to make it a voter (the leaders then
// lost quorum for good). Without the gossip key it cannot join at all;
// with the key but no certificate it proves nothing and is never placed,
// whether it advertises a raft address of its own or a real node's.
func TestFakeGossipMemberNeverBecomesAVoter(t *testing.T) {
	tc := newSecureTestCluster(t, 3)

	_, err := fakeMember(t, tc, "n9", fakeRaftPort(t), nil)
	require.Error(t, err, "a member without the gossip key cannot join")

	// n8 ranks first for group 1 among these nodes, so placement, trusting
	// gossip, would add it there at once.
	require.Equal(t, "n8", membership.Rendezvous("1", []string{"n1", "n2", "n3", "n7", "n8"})[0])
	_, err = fakeMember(t, tc, "n8", fakeRaftPort(t), tc.gossipKeys)
	require.NoError(t, err, "the key lets it gossip")
	_, err = fakeMember(t, tc, "n7", tc.raft[1], tc.gossipKeys) // n2's raft address
	require.NoError(t, err)
	for _, n := range tc.live() {
		for _, id := range []string{"n8", "n7"} {
			require.Eventually(t, func() bool {
				failed, _ := n.proofs.Last(id)
				return !failed.IsZero()
			}, 10*time.Second, 5*time.Millisecond, "%s never tried to prove %s", n.opts.NodeID, id)
			assert.Equal(t, membership.Alive, n.members.Snapshot()[id].State, "gossip believes %s", id)
		}
		assert.NotContains(t, n.members.Snapshot(), "n9")
	}
	tc.placementRounds()
	tc.requireVoters("n1", "n2", "n3")
	// Every group still has a leader every node knows (an election under a
	// loaded -race run may be under way at any instant, so this waits).
	for _, n := range tc.live() {
		require.Eventually(t, func() bool { return n.Ready(ctx(t)) == nil }, 10*time.Second, 5*time.Millisecond,
			"%s never became ready", n.opts.NodeID)
	}
	d, err := tc.nodes[0].Allow(ctx(t), []fsm.AllowRequest{{Client: "zoe", Cost: 1}})
	require.NoError(t, err)
	assert.True(t, d[0].Allowed)

	// What a node tells callers never trusts the fakes either: its status
	// shows them unproven, and its routes never send a caller to the HTTP
	// address n7 gossips beside n2's raft address.
	for _, n := range tc.live() {
		st, err := n.Status(ctx(t))
		require.NoError(t, err)
		for _, ns := range st.Nodes {
			if ns.ID == "n7" || ns.ID == "n8" {
				assert.Equal(t, string(membership.Unproven), ns.State, "%s's status of %s", n.opts.NodeID, ns.ID)
			}
		}
		// Routes name a leader per group once gossip has announced it (an
		// election may be under way under a loaded -race run).
		var rt Routes
		require.Eventually(t, func() bool { rt = n.Routes(); return len(rt.Leaders) == tc.groups },
			10*time.Second, 5*time.Millisecond, "%s's routes never named every group's leader", n.opts.NodeID)
		for g, addr := range rt.Leaders {
			assert.NotEqual(t, "127.0.0.36:1", addr, "%s routes group %d to a fake", n.opts.NodeID, g)
		}
	}
}

// fakeRaftPort is an address that accepts connections and closes them, as
// a fake member's "raft port".
func fakeRaftPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.36:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	return ln.Addr().String()
}

// TestForgedLeavingRemovesNoVoter: a "leaving" flag in gossip about a real
// voter (which a holder of the gossip key can forge) used to make the
// leaders remove it at once. Now the leaders ask the node itself, over
// mutual TLS, and it says no. A real graceful leave still works.
func TestForgedLeavingRemovesNoVoter(t *testing.T) {
	tc := newSecureTestCluster(t, 3)
	victim := tc.nodes[2]
	forged, err := json.Marshal(membership.Meta{ID: "n3", RaftAddr: victim.RaftAddr(), Groups: tc.groups, Leaving: true})
	require.NoError(t, err)
	forgedAt := time.Now()
	for _, n := range tc.nodes[:2] {
		n.members.NotifyUpdate(&memberlist.Node{Name: "n3", Meta: forged}) // what memberlist would deliver
	}
	for _, n := range tc.nodes[:2] {
		require.Eventually(t, func() bool {
			_, proved := n.proofs.Last("n3")
			return proved.After(forgedAt)
		}, 10*time.Second, 5*time.Millisecond, "%s never asked n3", n.opts.NodeID)
	}
	tc.placementRounds()
	tc.requireVoters("n1", "n2", "n3")

	// The real thing: n3 leaves, says so when asked, and is removed.
	lctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, victim.Leave(lctx))
	tc.nodes[2] = nil
	require.Eventually(t, func() bool {
		for _, n := range tc.live() {
			for _, g := range n.allGroups() {
				if g.Serving() && slices.Contains(raftgroup.VoterIDs(g.Raft.GetConfiguration().Configuration()), "n3") {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
}

// TestRaftPortFloodLeavesRoomForPeers reproduces the review's flood at a
// smaller scale: 1,500 connections that never send anything, held
// open against a node's raft port. The node keeps at most its handshake
// cap of them, counts the rest, and a peer that restarts meanwhile
// reconnects: every group gets its voters and leaders back.
func TestRaftPortFloodLeavesRoomForPeers(t *testing.T) {
	tc := newSecureTestCluster(t, 3)
	target := tc.nodes[0]
	const flood = 1500
	for range flood {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.37")}, Timeout: 5 * time.Second}
		conn, err := d.Dial("tcp", target.RaftAddr())
		if err != nil {
			continue // refused outright is fine too
		}
		t.Cleanup(func() { _ = conn.Close() })
	}
	require.Eventually(t, func() bool {
		st := target.mux.Stats()
		return st.Refused[raftmux.ReasonEvicted]+st.Refused[raftmux.ReasonLimit]+st.Refused[raftmux.ReasonRate] >= flood-raftmux.DefaultMaxPending
	}, 10*time.Second, 5*time.Millisecond)
	assert.LessOrEqual(t, target.mux.Stats().Pending, raftmux.DefaultMaxPending)

	tc.stop(1)
	tc.start(1)
	tc.waitStable(3)
	require.NoError(t, tc.nodes[1].Ready(ctx(t)))
	t.Logf("raft port of n1 after the flood: %+v", target.mux.Stats())
}
