package peerproof_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerproof"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/internal/logbuf"
	"github.com/quorate/quorate/transport/peertls"
	"github.com/quorate/quorate/transport/peertls/peertlstest"
	"github.com/quorate/quorate/transport/raftmux"
)

// failsafe bounds every wait in these tests. It only turns a hang into a
// failure; nothing waits for it to pass.
const failsafe = 5 * time.Second

func muxTLS(c *peertls.Config) *raftmux.TLS {
	if c == nil {
		return nil
	}
	return &raftmux.TLS{Server: c.Server, Client: c.Client}
}

// answer is what a peer's /internal/whoami handler does.
type answer func(ctx context.Context) (peerproof.Whoami, error)

// says answers whoami with id and leaving.
func says(id string, leaving bool) answer {
	return func(context.Context) (peerproof.Whoami, error) {
		return peerproof.Whoami{ID: id, Leaving: leaving}, nil
	}
}

// peer is another node's raft port as a proof sees it: a Mux on loopback
// (with the node's cluster TLS, or plain TCP if tc is nil) whose internal
// RPC layer serves /internal/whoami with ans (nothing if ans is nil), as
// package cluster's rpcHandler does.
type peer struct {
	addr  string
	asked atomic.Int32 // whoami requests that reached the handler
}

func startPeer(t *testing.T, tc *peertls.Config, ans answer) *peer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mux := raftmux.New(ln, raftmux.Options{TLS: muxTLS(tc)})
	l, err := mux.Layer(peerrpc.LayerName)
	require.NoError(t, err)
	p := &peer{addr: ln.Addr().String()}
	h := http.NewServeMux()
	if ans != nil {
		peerrpc.Handle(h, "/internal/whoami", func(ctx context.Context, _ struct{}) (peerproof.Whoami, error) {
			p.asked.Add(1)
			return ans(ctx)
		})
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: failsafe}
	served := make(chan error, 1)
	go func() { served <- mux.Serve() }()
	awaitServing(t, mux, p.addr)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		_ = srv.Close()
		require.NoError(t, mux.Close())
		select {
		case err := <-served:
			assert.NoError(t, err)
		case <-time.After(failsafe):
			assert.Fail(t, "Serve did not return")
		}
	})
	return p
}

// awaitServing returns once mux's Serve is accepting connections: a
// connection dialled to addr and closed at once has been refused. Closing a
// Mux whose Serve has not yet started races inside raftmux (Serve's
// reaper.Add against Close's reaper.Wait), which the race detector reports.
func awaitServing(t *testing.T, mux *raftmux.Mux, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, failsafe)
	require.NoError(t, err)
	_ = c.Close()
	require.Eventually(t, func() bool {
		st := mux.Stats()
		var refused uint64
		for _, n := range st.Refused {
			refused += n
		}
		return refused > 0 && st.Open == 0
	}, failsafe, time.Millisecond, "the mux never served")
}

// dialer is the proving node's internal RPC layer (with its cluster TLS,
// or plain TCP if tc is nil); it counts the dials it is asked for.
type dialer struct {
	layer *raftmux.Layer
	dials atomic.Int32
}

func newDialer(t *testing.T, tc *peertls.Config) *dialer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mux := raftmux.New(ln, raftmux.Options{TLS: muxTLS(tc)})
	t.Cleanup(func() { _ = mux.Close() })
	l, err := mux.Layer(peerrpc.LayerName)
	require.NoError(t, err)
	return &dialer{layer: l}
}

func (d *dialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.dials.Add(1)
	return d.layer.DialContext(ctx, network, addr)
}

// prove runs one proof with a deadline of failsafe.
func (d *dialer) prove(t *testing.T, id, addr string) (bool, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	return peerproof.Prove(ctx, d.Dial, id, addr)
}

func member(id, addr string, state membership.State, leaving bool) membership.Member {
	return membership.Member{State: state, Meta: membership.Meta{ID: id, RaftAddr: addr, Leaving: leaving}}
}

// prover runs peerproof.Prover over members with d, counting OnProved.
type prover struct {
	p      peerproof.Prover
	proved atomic.Int32
	logs   *logbuf.Buffer
}

func newProver(d *dialer, proofs *membership.Proofs, members map[string]membership.Member) *prover {
	pr := &prover{logs: &logbuf.Buffer{}}
	pr.p = peerproof.Prover{
		Dial:     d.Dial,
		Proofs:   proofs,
		Members:  func() map[string]membership.Member { return members },
		OnProved: func() { pr.proved.Add(1) },
		Logger:   slog.New(slog.NewTextHandler(pr.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	return pr
}

func TestAMemberIsProvedByACertificateNamingItsGossipedIDAndItsOwnWord(t *testing.T) {
	ca := peertlstest.Authority(t)
	d := newDialer(t, peertlstest.Node(t, ca, "n1"))
	for _, leaving := range []bool{false, true} {
		p := startPeer(t, peertlstest.Node(t, ca, "n2"), says("n2", leaving))
		got, err := d.prove(t, "n2", p.addr)
		require.NoError(t, err, "leaving=%v", leaving)
		assert.Equal(t, leaving, got, "the leaving flag is the one the member itself answered")
		assert.Equal(t, int32(1), p.asked.Load(), "the member was asked who it is")
	}
}

func TestACertificateNamingAnotherNodeProvesNothing(t *testing.T) {
	ca := peertlstest.Authority(t)
	d := newDialer(t, peertlstest.Node(t, ca, "n1"))
	// n3's certificate, at the address gossip gives for n2, on a node that
	// claims to be n2 when asked: the certificate alone decides.
	p := startPeer(t, peertlstest.Node(t, ca, "n3"), says("n2", true))
	leaving, err := d.prove(t, "n2", p.addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `certificate for "n3", not for "n2"`)
	assert.False(t, leaving)
	assert.Zero(t, p.asked.Load(), "a member whose certificate names another node is not even asked who it is")

	// The same node proves fine as the node its certificate names.
	q := startPeer(t, peertlstest.Node(t, ca, "n3"), says("n3", false))
	_, err = d.prove(t, "n3", q.addr)
	assert.NoError(t, err)
}

func TestACertificateOfAnotherCAProvesNothing(t *testing.T) {
	ca, other := peertlstest.Authority(t), peertlstest.Authority(t)
	t.Run("the member's certificate", func(t *testing.T) {
		d := newDialer(t, peertlstest.Node(t, ca, "n1"))
		p := startPeer(t, peertlstest.Node(t, other, "n2"), says("n2", false))
		_, err := d.prove(t, "n2", p.addr)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "certificate")
		assert.Zero(t, p.asked.Load())
	})
	t.Run("the prover's certificate", func(t *testing.T) {
		// The member's node refuses a prover it cannot verify: nothing is
		// proved over a stream that is not mutually authenticated.
		d := newDialer(t, peertlstest.Node(t, other, "n1"))
		p := startPeer(t, peertlstest.Node(t, ca, "n2"), says("n2", false))
		_, err := d.prove(t, "n2", p.addr)
		assert.Error(t, err)
		assert.Zero(t, p.asked.Load())
	})
}

func TestAMemberWithoutACertificateProvesNothing(t *testing.T) {
	// A plain raft port (a node without cluster TLS) answers whoami
	// truthfully, but shows no certificate.
	d := newDialer(t, nil)
	p := startPeer(t, nil, says("n2", false))
	_, err := d.prove(t, "n2", p.addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "presented no certificate")
	assert.Zero(t, p.asked.Load())
}

func TestAMemberThatSaysItIsSomeoneElseIsRefused(t *testing.T) {
	ca := peertlstest.Authority(t)
	d := newDialer(t, peertlstest.Node(t, ca, "n1"))
	p := startPeer(t, peertlstest.Node(t, ca, "n2"), says("n3", true))
	leaving, err := d.prove(t, "n2", p.addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `says it is "n3", gossip says "n2"`)
	assert.False(t, leaving, "a refused member's leaving flag is not reported")
	assert.Equal(t, int32(1), p.asked.Load())
}

func TestAMemberWithoutARaftAddressIsNotDialled(t *testing.T) {
	ca := peertlstest.Authority(t)
	d := newDialer(t, peertlstest.Node(t, ca, "n1"))
	_, err := d.prove(t, "n2", "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no raft address")
	assert.Zero(t, d.dials.Load())
}

func TestAMemberThatCannotAnswerWhoamiProvesNothing(t *testing.T) {
	ca := peertlstest.Authority(t)
	d := newDialer(t, peertlstest.Node(t, ca, "n1"))
	t.Run("its handler fails", func(t *testing.T) {
		p := startPeer(t, peertlstest.Node(t, ca, "n2"), func(context.Context) (peerproof.Whoami, error) {
			return peerproof.Whoami{ID: "n2", Leaving: true}, errors.New("not ready to say")
		})
		leaving, err := d.prove(t, "n2", p.addr)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not ready to say")
		assert.False(t, leaving)
		assert.Equal(t, int32(1), p.asked.Load())
	})
	t.Run("it serves no whoami", func(t *testing.T) {
		p := startPeer(t, peertlstest.Node(t, ca, "n2"), nil)
		_, err := d.prove(t, "n2", p.addr)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "HTTP 404")
	})
}

func TestAProofThatGetsNoAnswerEndsAtItsDeadline(t *testing.T) {
	ca := peertlstest.Authority(t)
	d := newDialer(t, peertlstest.Node(t, ca, "n1"))
	release := make(chan struct{})
	p := startPeer(t, peertlstest.Node(t, ca, "n2"), func(ctx context.Context) (peerproof.Whoami, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return peerproof.Whoami{ID: "n2"}, nil
	})
	t.Cleanup(func() { close(release) }) // before the peer's cleanup

	const deadline = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := peerproof.Prove(ctx, d.Dial, "n2", p.addr)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(failsafe):
		require.FailNow(t, "the proof waited for an answer past its deadline")
	}
	elapsed := time.Since(start)
	require.Error(t, err)
	assert.GreaterOrEqual(t, elapsed, deadline, "the proof gave up before its deadline")
	assert.Equal(t, int32(1), p.asked.Load())
}

func TestRunPlacesOnlyMembersThatProvedTheirIdentity(t *testing.T) {
	ca := peertlstest.Authority(t)
	d := newDialer(t, peertlstest.Node(t, ca, "n1"))
	honest := startPeer(t, peertlstest.Node(t, ca, "n2"), says("n2", false))
	impostor := startPeer(t, peertlstest.Node(t, ca, "n9"), says("n3", false)) // gossips as n3
	liar := startPeer(t, peertlstest.Node(t, ca, "n4"), says("n2", false))
	dead := startPeer(t, peertlstest.Node(t, ca, "n5"), says("n5", false))
	members := map[string]membership.Member{
		"n2": member("n2", honest.addr, membership.Alive, false),
		"n3": member("n3", impostor.addr, membership.Alive, false),
		"n4": member("n4", liar.addr, membership.Alive, false),
		"n5": member("n5", dead.addr, membership.Dead, false),
		"n6": member("n6", "", membership.Alive, false),
	}
	proofs := membership.NewProofs()
	pr := newProver(d, proofs, members)
	var recorded atomic.Bool // placement, kicked by OnProved, must see the proof
	pr.p.OnProved = func() {
		pr.proved.Add(1)
		recorded.Store(proofs.Trusts("n2", honest.addr))
	}
	pr.p.Run()

	assert.True(t, proofs.Trusts("n2", honest.addr))
	assert.True(t, recorded.Load(), "the proof was recorded before OnProved")
	for _, id := range []string{"n3", "n4", "n5", "n6"} {
		assert.False(t, proofs.Trusts(id, members[id].Meta.RaftAddr), id)
	}
	assert.Equal(t, int32(1), pr.proved.Load(), "OnProved once, for n2")
	// n5 (dead) and n6 (no raft address) are not even dialled: there is
	// nothing to prove them at, and they stay unplaced.
	assert.Equal(t, int32(3), d.dials.Load(), "n2, n3 and n4 dialled")
	for id, wantFailed := range map[string]bool{"n2": false, "n3": true, "n4": true, "n5": false, "n6": false} {
		failed, proved := proofs.Last(id)
		assert.Equal(t, wantFailed, !failed.IsZero(), "%s: failure recorded", id)
		assert.Equal(t, id == "n2", !proved.IsZero(), "%s: success recorded", id)
	}
	assert.Zero(t, dead.asked.Load(), "a dead member is not proved")
	assert.True(t, logged(pr.logs, "failed to prove", "member=n3", `for \"n9\"`), "the refusal is logged with its reason")
	assert.True(t, logged(pr.logs, "proved its identity", "member=n2"))

	trusted := proofs.Trusted(members)
	assert.Equal(t, membership.Alive, trusted["n2"].State)
	for _, id := range []string{"n3", "n4", "n6"} {
		assert.Equal(t, membership.Unproven, trusted[id].State, id)
	}
}

func TestRunConfirmsALeavingFlagOnlyFromTheMemberItself(t *testing.T) {
	ca := peertlstest.Authority(t)
	d := newDialer(t, peertlstest.Node(t, ca, "n1"))
	leaving := startPeer(t, peertlstest.Node(t, ca, "n2"), says("n2", true))
	forged := startPeer(t, peertlstest.Node(t, ca, "n3"), says("n3", false)) // gossip says it leaves; it does not
	members := map[string]membership.Member{
		"n2": member("n2", leaving.addr, membership.Alive, true),
		"n3": member("n3", forged.addr, membership.Alive, true),
	}
	proofs := membership.NewProofs()
	newProver(d, proofs, members).p.Run()
	require.True(t, proofs.Trusts("n2", leaving.addr))
	require.True(t, proofs.Trusts("n3", forged.addr))

	trusted := proofs.Trusted(map[string]membership.Member{
		"n2": member("n2", leaving.addr, membership.Alive, true),
		"n3": member("n3", forged.addr, membership.Alive, true),
	})
	assert.True(t, trusted["n2"].Meta.Leaving, "n2 said itself it is leaving")
	assert.False(t, trusted["n3"].Meta.Leaving, "n3's leaving flag came from gossip alone")

	// Once they are gone, a confirmed departure is a departure, a forged
	// one a crash.
	gone := proofs.Trusted(map[string]membership.Member{
		"n2": member("n2", leaving.addr, membership.Left, true),
		"n3": member("n3", forged.addr, membership.Left, true),
	})
	assert.Equal(t, membership.Left, gone["n2"].State)
	assert.Equal(t, membership.Dead, gone["n3"].State)
}

func TestRunDoesNotProveAMemberAgainWhileGossipKeepsItsAddress(t *testing.T) {
	ca := peertlstest.Authority(t)
	d := newDialer(t, peertlstest.Node(t, ca, "n1"))
	honest := startPeer(t, peertlstest.Node(t, ca, "n2"), says("n2", false))
	members := map[string]membership.Member{"n2": member("n2", honest.addr, membership.Alive, false)}
	proofs := membership.NewProofs()
	pr := newProver(d, proofs, members)
	pr.p.Run()
	pr.p.Run()
	require.True(t, proofs.Trusts("n2", honest.addr))
	assert.Equal(t, int32(1), d.dials.Load(), "a proven member is not dialled again")
	assert.Equal(t, int32(1), honest.asked.Load())

	// Gossip now gives n2 another address, where another node answers:
	// the new address is proved, and fails.
	impostor := startPeer(t, peertlstest.Node(t, ca, "n7"), says("n2", false))
	members["n2"] = member("n2", impostor.addr, membership.Alive, false)
	pr.p.Run()
	assert.Equal(t, int32(2), d.dials.Load())
	assert.False(t, proofs.Trusts("n2", impostor.addr))
	assert.Equal(t, membership.Unproven, proofs.Trusted(map[string]membership.Member{"n2": members["n2"]})["n2"].State)
}

func TestRunProvesMembersInParallel(t *testing.T) {
	ca := peertlstest.Authority(t)
	d := newDialer(t, peertlstest.Node(t, ca, "n1"))
	// Each member answers only once every member has been asked: proofs
	// run one after another would each wait out their timeout and fail.
	const n = 3
	var arrived atomic.Int32
	all := make(chan struct{})
	members := map[string]membership.Member{}
	for i := range n {
		id := "n" + string(rune('2'+i))
		p := startPeer(t, peertlstest.Node(t, ca, id), func(ctx context.Context) (peerproof.Whoami, error) {
			if arrived.Add(1) == n {
				close(all)
			}
			select {
			case <-all:
				return peerproof.Whoami{ID: id}, nil
			case <-ctx.Done():
				return peerproof.Whoami{}, ctx.Err()
			}
		})
		members[id] = member(id, p.addr, membership.Alive, false)
	}
	proofs := membership.NewProofs()
	pr := newProver(d, proofs, members)
	pr.p.Run()
	for id, mb := range members {
		assert.True(t, proofs.Trusts(id, mb.Meta.RaftAddr), id)
	}
	assert.Equal(t, int32(n), pr.proved.Load())
}

// logged reports whether a line of b holds every one of subs.
func logged(b *logbuf.Buffer, subs ...string) bool {
	_, ok := b.LineWith(subs...)
	return ok
}
