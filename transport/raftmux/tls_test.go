package raftmux_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/transport/peertls"
	"github.com/quorate/quorate/transport/raftmux"
)

// testPKI is a cluster CA that issues node configurations.
type testPKI struct {
	t  *testing.T
	ca *peertls.Authority
}

func newPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, err := peertls.NewAuthority(time.Now())
	require.NoError(t, err)
	return &testPKI{t: t, ca: ca}
}

// node returns the mux TLS settings of node id, signed by this CA.
func (p *testPKI) node(id string) *raftmux.TLS {
	p.t.Helper()
	c := p.config(id)
	return &raftmux.TLS{Server: c.Server, Client: c.Client}
}

func (p *testPKI) config(id string) *peertls.Config {
	p.t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(id, []string{"127.0.0.1"}, time.Now())
	require.NoError(p.t, err)
	c, err := peertls.NewConfig(p.ca.CertPEM(), certPEM, keyPEM, time.Now())
	require.NoError(p.t, err)
	return c
}

// dialFrom opens a TCP connection to addr from the loopback address src,
// so that a test can play a peer with an address of its own.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: failsafe}
	conn, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestTLSRefusesPeersWithoutAClusterCertificate: on a TLS mux only a peer
// whose certificate the cluster CA signed gets a stream; plain TCP (today's
// protocol), TLS without a client certificate and a certificate of another
// CA are all refused, and a node does not talk to a server of another CA.
func TestTLSRefusesPeersWithoutAClusterCertificate(t *testing.T) {
	pki := newPKI(t)
	n := startNode(t, raftmux.Options{TLS: pki.node("n1"), HeaderTimeout: time.Second}, "echo")
	echo(n.layers["echo"])
	peer := startNode(t, raftmux.Options{TLS: pki.node("n2")}, "echo")
	roundTrip(t, peer.layers["echo"], n.addr())

	conn, err := peer.layers["echo"].Dial(raft.ServerAddress(n.addr()), failsafe)
	require.NoError(t, err)
	defer conn.Close()
	if cert := raftmux.PeerCertificate(conn); assert.NotNil(t, cert) {
		assert.True(t, peertls.Names(cert, "n1"), "the server presented n1's certificate")
		assert.False(t, peertls.Names(cert, "n2"))
	}

	good := pki.config("n3").Client
	noCert := good.Clone()
	noCert.Certificates = nil
	otherCA := newPKI(t).config("n3").Client
	tests := []struct {
		name string
		dial func(t *testing.T) net.Conn
	}{
		{"plain TCP, raft header", func(t *testing.T) net.Conn { return rawDial(t, n.addr(), header("echo")) }},
		{"TLS without a client certificate", func(t *testing.T) net.Conn {
			return tlsDial(t, n.addr(), noCert)
		}},
		{"certificate of another CA", func(t *testing.T) net.Conn {
			// The server is not verified here: the point is what it does.
			c := otherCA.Clone()
			c.VerifyConnection = nil
			return tlsDial(t, n.addr(), c)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := n.mux.Stats().Refused[raftmux.ReasonTLS]
			requireClosed(t, tt.dial(t))
			require.Eventually(t, func() bool { return n.mux.Stats().Refused[raftmux.ReasonTLS] > before },
				failsafe, time.Millisecond, "refusal not counted")
			roundTrip(t, peer.layers["echo"], n.addr())
		})
	}

	// And the other way round: a node of this cluster refuses to talk to a
	// server whose certificate another CA signed.
	stranger := startNode(t, raftmux.Options{TLS: newPKI(t).node("n1")}, "echo")
	echo(stranger.layers["echo"])
	_, err = peer.layers["echo"].Dial(raft.ServerAddress(stranger.addr()), failsafe)
	require.ErrorContains(t, err, "certificate")
}

// tlsDial connects to addr with c, sends a stream header inside TLS and
// returns the connection, whatever the server thought of the handshake.
func tlsDial(t *testing.T, addr string, c *tls.Config) net.Conn {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: failsafe}, "tcp", addr, c)
	require.NoError(t, err, "a TLS 1.3 client finishes its side before the server checks its certificate")
	t.Cleanup(func() { _ = conn.Close() })
	_, _ = conn.Write(header("echo"))
	return conn
}

// TestFloodIsCapped reproduces the review's flood (thousands of idle
// connections to the raft port) at a smaller scale: connections that never
// finish their handshake, then streams from a peer with a valid
// certificate that never send anything. The Mux holds at most its limits,
// counts what it refused, and a real peer on another address still gets
// through at every point.
func TestFloodIsCapped(t *testing.T) {
	pki := newPKI(t)
	opts := raftmux.Options{TLS: pki.node("n1"), MaxStreams: 96, MaxStreamsPerIP: 48, MaxPending: 16, HeaderTimeout: time.Hour}
	n := startNode(t, opts, "echo")
	echo(n.layers["echo"])
	peer := startNode(t, raftmux.Options{TLS: pki.node("n2")}, "echo")
	roundTrip(t, peer.layers["echo"], n.addr())

	// 1. Silent connections from one address: capped per address, and
	// never more than MaxPending in their handshake.
	const flood = 400
	for range flood {
		dialFrom(t, "127.0.0.32", n.addr())
	}
	// 2. Silent connections from another address: they evict the oldest
	// pending ones instead of piling up.
	for range flood {
		dialFrom(t, "127.0.0.33", n.addr())
	}
	require.Eventually(t, func() bool {
		st := n.mux.Stats()
		return st.Refused[raftmux.ReasonLimit]+st.Refused[raftmux.ReasonEvicted]+st.Refused[raftmux.ReasonRate] >= flood
	}, failsafe, time.Millisecond)
	st := n.mux.Stats()
	assert.LessOrEqual(t, st.Pending, opts.MaxPending, "pending handshakes")
	assert.LessOrEqual(t, st.Open, opts.MaxStreams)
	roundTrip(t, peer.layers["echo"], n.addr())

	// 3. Streams from a holder of a valid certificate that then sit idle:
	// capped per address too.
	insider := pki.config("n9").Client
	var opened int
	for range 2 * opts.MaxStreamsPerIP {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.34")}, Timeout: failsafe}
		conn, err := tls.DialWithDialer(d, "tcp", n.addr(), insider)
		if err != nil {
			continue // refused before the handshake
		}
		t.Cleanup(func() { _ = conn.Close() })
		if _, err := conn.Write(header("echo")); err == nil {
			opened++
		}
	}
	require.Eventually(t, func() bool { return n.mux.Stats().Pending == 0 || n.mux.Stats().Open >= opts.MaxStreamsPerIP },
		failsafe, time.Millisecond)
	st = n.mux.Stats()
	assert.LessOrEqual(t, st.Open, opts.MaxStreams)
	assert.Greater(t, st.Refused[raftmux.ReasonLimit], uint64(0))
	roundTrip(t, peer.layers["echo"], n.addr())
	t.Logf("stats after the flood: %+v (insider streams dialled: %d)", st, opened)
}

// TestIdleStreamsAreClosed: a stream that carries nothing for IdleTimeout
// is closed and counted; the layer's owner sees its stream end.
func TestIdleStreamsAreClosed(t *testing.T) {
	n := startNode(t, raftmux.Options{IdleTimeout: 100 * time.Millisecond}, "echo")
	echo(n.layers["echo"])
	client := startNode(t, raftmux.Options{IdleTimeout: -1}, "echo")
	conn, err := client.layers["echo"].Dial(raft.ServerAddress(n.addr()), failsafe)
	require.NoError(t, err)
	defer conn.Close()
	echoes(t, conn)
	requireClosed(t, conn) // nothing more is sent: the server closes it
	assert.Equal(t, uint64(1), n.mux.Stats().Refused[raftmux.ReasonIdle])
	assert.Equal(t, 0, n.mux.Stats().Open)
	roundTrip(t, client.layers["echo"], n.addr())
}

func TestStatsCountStreams(t *testing.T) {
	n := startNode(t, raftmux.Options{}, "echo")
	echo(n.layers["echo"])
	client := startNode(t, raftmux.Options{}, "echo")
	var conns []net.Conn
	for i := range 3 {
		conn, err := client.layers["echo"].Dial(raft.ServerAddress(n.addr()), failsafe)
		require.NoError(t, err, fmt.Sprint(i))
		require.NoError(t, conn.SetDeadline(time.Now().Add(failsafe)))
		echoes(t, conn)
		conns = append(conns, conn)
	}
	st := n.mux.Stats()
	assert.Equal(t, 3, st.Open)
	assert.Equal(t, uint64(3), st.Accepted)
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	require.Eventually(t, func() bool { return n.mux.Stats().Open == 0 }, failsafe, time.Millisecond,
		"closing a stream frees its place")
}
