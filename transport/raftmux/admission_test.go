package raftmux_test

import (
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/transport/raftmux"
)

// handshakeOn finishes, on a connection dialled earlier and left silent,
// the TLS handshake and header a peer would send, and checks the stream
// echoes: it fails if the Mux closed the connection meanwhile.
func handshakeOn(t *testing.T, conn net.Conn, cfg *tls.Config) {
	t.Helper()
	require.NoError(t, conn.SetDeadline(time.Now().Add(failsafe)))
	tc := tls.Client(conn, cfg)
	require.NoError(t, tc.Handshake(), "the silent connection was still open")
	_, err := tc.Write(header("echo"))
	require.NoError(t, err)
	echoes(t, tc)
}

// TestAFloodFromOneAddressCannotEvictAnother: silent connections from one
// address (a recorded ClientHello replayed, or just connect-and-hold) turn
// over among themselves at MaxPendingPerIP; another address's connection
// in its handshake, the oldest of all, is not the one they close. Before
// the per-address cap one address could hold the whole pool and evict
// every real handshake.
func TestAFloodFromOneAddressCannotEvictAnother(t *testing.T) {
	pki := newPKI(t)
	opts := raftmux.Options{TLS: pki.node("n1"), MaxPending: 16, MaxPendingPerIP: 4, HeaderTimeout: time.Hour,
		HandshakeRate: -1, HandshakeRatePerIP: -1}
	n := startNode(t, opts, "echo")
	echo(n.layers["echo"])

	slow := dialFrom(t, "127.0.0.40", n.addr()) // a peer whose handshake is still under way
	require.Eventually(t, func() bool { return n.mux.Stats().Pending == 1 }, failsafe, time.Millisecond)
	const flood = 200
	for range flood {
		dialFrom(t, "127.0.0.41", n.addr())
	}
	require.Eventually(t, func() bool { return n.mux.Stats().Refused[raftmux.ReasonEvicted] >= uint64(flood-opts.MaxPendingPerIP) },
		failsafe, time.Millisecond)
	st := n.mux.Stats()
	assert.LessOrEqual(t, st.Pending, opts.MaxPendingPerIP+1, "the flooding address holds at most its share")
	handshakeOn(t, slow, pki.config("n2").Client)
}

// manualClock is a settable clock for the handshake rates.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestHandshakeRateHoldsUnknownAddressesNotPeers: an address that never
// completed a handshake gets HandshakeRatePerIP connections a second and
// no more, refused before any TLS work; a peer that completed one is not
// held to it.
func TestHandshakeRateHoldsUnknownAddressesNotPeers(t *testing.T) {
	pki := newPKI(t)
	clk := &manualClock{t: time.Unix(1_800_000_000, 0)}
	opts := raftmux.Options{TLS: pki.node("n1"), HeaderTimeout: time.Hour, HandshakeRatePerIP: 5, HandshakeRate: 1000, Now: clk.now}
	n := startNode(t, opts, "echo")
	echo(n.layers["echo"])

	for range 12 {
		dialFrom(t, "127.0.0.50", n.addr())
	}
	admitted := func() bool {
		st := n.mux.Stats()
		return st.Refused[raftmux.ReasonRate]+uint64(st.Pending) == 12
	}
	require.Eventually(t, admitted, failsafe, time.Millisecond)
	assert.Equal(t, uint64(7), n.mux.Stats().Refused[raftmux.ReasonRate], "a burst of 5, the clock standing still")

	// A peer (127.0.0.1) completes a handshake once, within its own
	// budget; from then on it is known and dials as often as it needs.
	peer := startNode(t, raftmux.Options{TLS: pki.node("n2")}, "echo")
	for range 10 {
		roundTrip(t, peer.layers["echo"], n.addr())
	}
	assert.Equal(t, uint64(7), n.mux.Stats().Refused[raftmux.ReasonRate], "the peer was never refused")

	clk.add(time.Second)
	for range 6 {
		dialFrom(t, "127.0.0.50", n.addr())
	}
	require.Eventually(t, func() bool { return n.mux.Stats().Refused[raftmux.ReasonRate] == 8 }, failsafe, time.Millisecond,
		"a second later, 5 more from the unknown address, then refused again")
}
