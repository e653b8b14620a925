package raftport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/raftport"
	"github.com/quorate/quorate/transport/peertls"
	"github.com/quorate/quorate/transport/peertls/peertlstest"
	"github.com/quorate/quorate/transport/raftmux"
)

// failsafe bounds every wait in these tests. It only turns a hang into a
// failure; nothing waits for it to pass.
const failsafe = 5 * time.Second

var discard = slog.New(slog.DiscardHandler)

// port is a node's raft port on a loopback address: a Mux configured by
// opts, serving until cleanup.
type port struct {
	mux  *raftmux.Mux
	addr string
}

func startPort(t *testing.T, ip string, opts raftmux.Options) *port {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require.NoError(t, err)
	p := &port{mux: raftmux.New(ln, opts), addr: ln.Addr().String()}
	served := make(chan error, 1)
	go func() { served <- p.mux.Serve() }()
	t.Cleanup(func() {
		require.NoError(t, p.mux.Close())
		select {
		case err := <-served:
			assert.NoError(t, err)
		case <-time.After(failsafe):
			assert.Fail(t, "Serve did not return")
		}
	})
	return p
}

// layer registers name on the port and wraps it as the node does: it
// advertises the port's address and obeys partition.
func (p *port) layer(t *testing.T, name string, partition *raftport.Partition) *raftport.Layer {
	t.Helper()
	l, err := p.mux.Layer(name)
	require.NoError(t, err)
	return raftport.NewLayer(l, p.addr, partition)
}

// serveTagged answers every stream accepted on l with tag, then echoes
// what it reads. ended receives once per stream when the stream ends on
// this side.
func serveTagged(l net.Listener, tag string) (ended <-chan struct{}) {
	ch := make(chan struct{}, 64)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() {
					conn.Close()
					select {
					case ch <- struct{}{}:
					default:
					}
				}()
				if _, err := io.WriteString(conn, tag); err != nil {
					return
				}
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
	return ch
}

// greets checks that conn was answered by tag and echoes.
func greets(t *testing.T, conn net.Conn, tag string) {
	t.Helper()
	require.NoError(t, conn.SetDeadline(time.Now().Add(failsafe)))
	got := make([]byte, len(tag))
	_, err := io.ReadFull(conn, got)
	require.NoError(t, err)
	assert.Equal(t, tag, string(got))
	echoes(t, conn)
}

// echoes checks that what is written to conn comes back.
func echoes(t *testing.T, conn net.Conn) {
	t.Helper()
	require.NoError(t, conn.SetDeadline(time.Now().Add(failsafe)))
	_, err := conn.Write([]byte("ping"))
	require.NoError(t, err)
	got := make([]byte, 4)
	_, err = io.ReadFull(conn, got)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(got))
	require.NoError(t, conn.SetDeadline(time.Time{}))
}

// requireClosed checks that the other end closes conn: a read fails other
// than by running into the failsafe deadline.
func requireClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(failsafe)))
	_, err := io.ReadAll(conn)
	if err == nil {
		return // EOF
	}
	require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "stream still open after %v", failsafe)
}

// ---- MuxOptions

// peerNeeds is what the MuxOptions doc says one peer may hold open on a
// node of groups data groups (and the meta group) when it leads them all:
// a heartbeat stream and up to three replication streams per group, and up
// to 64 pooled internal RPC streams.
func peerNeeds(groups int) int { return 4*(groups+1) + 64 }

func TestMuxOptionsLeaveEveryPeerRoomForItsStreams(t *testing.T) {
	prev := raftmux.Options{}
	for _, groups := range []int{1, 2, 3, 8, 64, 127, 128, 500, 1000, 4096} {
		mo := raftport.MuxOptions(groups, nil, discard)
		need := peerNeeds(groups)
		assert.GreaterOrEqual(t, mo.MaxStreamsPerIP, 2*need,
			"groups=%d: the per-address cap is several times what a peer needs", groups)
		assert.GreaterOrEqual(t, mo.MaxStreams-mo.MaxStreamsPerIP, need,
			"groups=%d: one address at its cap leaves room for the other peers", groups)
		assert.GreaterOrEqual(t, mo.MaxStreamsPerIP, raftmux.DefaultMaxStreamsPerIP, "groups=%d: never below the mux's defaults", groups)
		assert.GreaterOrEqual(t, mo.MaxStreams, raftmux.DefaultMaxStreams, "groups=%d", groups)
		assert.GreaterOrEqual(t, mo.MaxStreamsPerIP, prev.MaxStreamsPerIP, "groups=%d: more groups never lower the caps", groups)
		assert.GreaterOrEqual(t, mo.MaxStreams, prev.MaxStreams, "groups=%d", groups)
		assert.Nil(t, mo.TLS, "groups=%d: without cluster TLS the port is plain TCP", groups)
		assert.NotNil(t, mo.Logger)
		prev = mo
	}
}

func TestMuxOptionsAdmitAPeerLeadingEveryGroupFromOneAddress(t *testing.T) {
	// 300 groups: a peer leading all of them needs more streams than the
	// mux's default per-address cap allows.
	const groups = 300
	need := peerNeeds(groups)
	require.Greater(t, need, raftmux.DefaultMaxStreamsPerIP, "the test needs a node the defaults would starve")

	srv := startPort(t, "127.0.0.1", raftport.MuxOptions(groups, nil, discard))
	l := srv.layer(t, raftport.RaftLayer, nil)
	var mu sync.Mutex
	var held []net.Conn // what the node accepted, held open
	accepted := make(chan struct{}, need)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			accepted <- struct{}{}
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})

	// One stream at a time, each held open once the node has accepted it:
	// what is measured is the streams open at once, not the handshake
	// limits a burst would meet.
	client := startPort(t, "127.0.0.1", raftmux.Options{Logger: discard})
	cl := client.layer(t, raftport.RaftLayer, nil)
	for i := range need {
		ctx, cancel := context.WithTimeout(context.Background(), failsafe)
		c, err := cl.DialContext(ctx, "tcp", srv.addr)
		cancel()
		require.NoError(t, err, "stream %d", i)
		t.Cleanup(func() { _ = c.Close() })
		select {
		case <-accepted:
		case <-time.After(failsafe):
			require.FailNow(t, "stream not accepted", "stream %d of the %d the peer needs; stats %+v", i, need, srv.mux.Stats())
		}
	}
	// The mux counts a stream just after handing it over.
	assert.Eventually(t, func() bool { return srv.mux.Stats().Accepted == uint64(need) }, failsafe, time.Millisecond,
		"every stream the peer needs reached the layer")
	st := srv.mux.Stats()
	assert.Equal(t, need, st.Open)
	assert.Zero(t, st.Refused[raftmux.ReasonLimit], "no stream refused for a limit")
}

func TestMuxOptionsWithClusterTLSSpeakOnlyMutualTLSOfTheCluster(t *testing.T) {
	ca := peertlstest.Authority(t)
	srv := startPort(t, "127.0.0.1", raftport.MuxOptions(3, peertlstest.Node(t, ca, "n1"), discard))
	l := srv.layer(t, "rpc", nil)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()

	mo := raftport.MuxOptions(3, peertlstest.Node(t, ca, "n2"), discard)
	require.NotNil(t, mo.TLS)
	peer := startPort(t, "127.0.0.1", mo)
	conn, err := peer.layer(t, "rpc", nil).Dial(raft.ServerAddress(srv.addr), failsafe)
	require.NoError(t, err)
	defer conn.Close()
	cert := raftmux.PeerCertificate(conn)
	require.NotNil(t, cert, "the stream is TLS")
	assert.True(t, peertls.Names(cert, "n1"), "the dialler sees the node's certificate")
	select {
	case c := <-accepted:
		defer c.Close()
		cert := raftmux.PeerCertificate(c)
		require.NotNil(t, cert)
		assert.True(t, peertls.Names(cert, "n2"), "the node sees the dialler's: TLS is mutual")
	case <-time.After(failsafe):
		require.FailNow(t, "the stream did not reach the layer")
	}

	// A node without cluster TLS speaks plain TCP, which the node closes.
	plain := startPort(t, "127.0.0.1", raftport.MuxOptions(3, nil, discard))
	before := srv.mux.Stats().Refused[raftmux.ReasonTLS]
	pc, err := plain.layer(t, "rpc", nil).Dial(raft.ServerAddress(srv.addr), failsafe)
	require.NoError(t, err, "a plain dial only writes its header")
	defer pc.Close()
	requireClosed(t, pc)
	assert.Nil(t, raftmux.PeerCertificate(pc))
	require.Eventually(t, func() bool { return srv.mux.Stats().Refused[raftmux.ReasonTLS] > before }, failsafe, time.Millisecond)

	// And a node of another cluster is refused before any stream opens.
	stranger := startPort(t, "127.0.0.1", raftport.MuxOptions(3, peertlstest.Node(t, peertlstest.Authority(t), "n2"), discard))
	_, err = stranger.layer(t, "rpc", nil).Dial(raft.ServerAddress(srv.addr), failsafe)
	assert.Error(t, err)
}

// ---- Advertised

func TestAdvertisedIsTheConfiguredAddressUnlessItsPortIsZero(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 45678}
	for _, configured := range []string{"10.0.0.5:7071", "node1.example:7071", "[::1]:7071", "127.0.0.1:7071"} {
		assert.Equal(t, configured, raftport.Advertised(configured, bound), "a configured port is advertised as configured")
	}
	// Port 0: what the listener bound is what peers can dial.
	for _, configured := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := net.Listen("tcp", configured)
		require.NoError(t, err, configured)
		defer ln.Close()
		got := raftport.Advertised(configured, ln.Addr())
		assert.Equal(t, ln.Addr().String(), got, configured)
		requireDials(t, ln, got)
	}
}

func TestAdvertisedFallsBackToTheBoundAddressForInputWithoutAPort(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 45678}
	for _, configured := range []string{"", "127.0.0.1", "node1.example", "a:b:c", "[::1", "::1"} {
		assert.Equal(t, bound.String(), raftport.Advertised(configured, bound), "configured %q", configured)
	}
}

// The listener (net.Listen) binds a random port for every spelling of 0,
// an empty port ("127.0.0.1:"), "00", "+0": each advertises the bound
// address, which peers can dial.
func TestAdvertisedIsTheBoundAddressForEverySpellingOfPortZero(t *testing.T) {
	for _, configured := range []string{"127.0.0.1:", "127.0.0.1:00", "127.0.0.1:+0"} {
		ln, err := net.Listen("tcp", configured)
		require.NoError(t, err, configured)
		defer ln.Close()
		require.NotEqual(t, 0, ln.Addr().(*net.TCPAddr).Port, "%q binds a random port", configured)
		assert.Equal(t, ln.Addr().String(), raftport.Advertised(configured, ln.Addr()), "configured %q", configured)
	}
}

// requireDials checks that addr reaches ln.
func requireDials(t *testing.T, ln net.Listener, addr string) {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := net.DialTimeout("tcp", addr, failsafe)
	require.NoError(t, err, "dial %s", addr)
	defer c.Close()
	select {
	case s := <-accepted:
		s.Close()
	case <-time.After(failsafe):
		require.FailNow(t, "not accepted", addr)
	}
}

// ---- Layer

func TestLayerReportsTheAdvertisedAddressNotTheBoundOne(t *testing.T) {
	srv := startPort(t, "127.0.0.1", raftmux.Options{Logger: discard})
	ml, err := srv.mux.Layer(raftport.RaftLayer)
	require.NoError(t, err)
	const advertised = "node1.example:7071"
	l := raftport.NewLayer(ml, advertised, nil)
	assert.Equal(t, advertised, l.Addr().String())
	assert.Equal(t, "tcp", l.Addr().Network())
	assert.NotEqual(t, ml.Addr().String(), l.Addr().String())

	// raft takes its local address from the layer: peers are told the
	// advertised one.
	trans := raft.NewNetworkTransport(l, 1, failsafe, io.Discard)
	defer trans.Close()
	assert.Equal(t, raft.ServerAddress(advertised), trans.LocalAddr())
}

func TestLayerDialsThePeersLayerOfTheSameName(t *testing.T) {
	a := startPort(t, "127.0.0.1", raftmux.Options{Logger: discard})
	b := startPort(t, "127.0.0.1", raftmux.Options{Logger: discard})
	aRaft, aRPC := a.layer(t, raftport.RaftLayer, nil), a.layer(t, "rpc", nil)
	serveTagged(b.layer(t, raftport.RaftLayer, nil), "raft@b")
	serveTagged(b.layer(t, "rpc", nil), "rpc@b")

	conn, err := aRaft.Dial(raft.ServerAddress(b.addr), failsafe)
	require.NoError(t, err)
	defer conn.Close()
	greets(t, conn, "raft@b")

	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	conn, err = aRPC.DialContext(ctx, "tcp", b.addr)
	require.NoError(t, err)
	defer conn.Close()
	greets(t, conn, "rpc@b")
}

func TestLayerCarriesRaftTrafficAndTheInternalRPC(t *testing.T) {
	ca := peertlstest.Authority(t)
	a := startPort(t, "127.0.0.1", raftport.MuxOptions(3, peertlstest.Node(t, ca, "n1"), discard))
	b := startPort(t, "127.0.0.1", raftport.MuxOptions(3, peertlstest.Node(t, ca, "n2"), discard))
	p := &raftport.Partition{}

	// Raft: a vote request from a's transport to b's, answered by b.
	ta := raft.NewNetworkTransport(a.layer(t, raftport.RaftLayer, p), 3, failsafe, io.Discard)
	defer ta.Close()
	tb := raft.NewNetworkTransport(b.layer(t, raftport.RaftLayer, p), 3, failsafe, io.Discard)
	defer tb.Close()
	go func() {
		for rpc := range tb.Consumer() {
			req, ok := rpc.Command.(*raft.RequestVoteRequest)
			if !ok {
				rpc.Respond(nil, fmt.Errorf("unexpected %T", rpc.Command))
				continue
			}
			rpc.Respond(&raft.RequestVoteResponse{Term: req.Term, Granted: string(req.RPCHeader.Addr) == a.addr}, nil)
		}
	}()
	var resp raft.RequestVoteResponse
	require.NoError(t, ta.RequestVote("n2", raft.ServerAddress(b.addr), &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte(ta.LocalAddr())},
		Term:      7,
	}, &resp))
	assert.Equal(t, uint64(7), resp.Term)
	assert.True(t, resp.Granted, "b heard a's advertised address")

	// The internal RPC: HTTP served on b's rpc layer, dialled through a's.
	h := http.NewServeMux()
	h.HandleFunc("GET /internal/hello", func(w http.ResponseWriter, r *http.Request) {
		cert := raftmux.PeerCertificate(r.Context().Value(connKey{}).(net.Conn))
		if cert == nil {
			http.Error(w, "no certificate", http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, "hello "+cert.Subject.CommonName)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: failsafe,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }}
	go func() { _ = srv.Serve(b.layer(t, "rpc", p)) }()
	defer srv.Close()
	tr := &http.Transport{DialContext: a.layer(t, "rpc", p).DialContext}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: failsafe}
	res, err := client.Get("http://" + b.addr + "/internal/hello")
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "hello n1", string(body), "b served a over mutual TLS")
}

type connKey struct{}

func TestPeerCertificateSeesThroughAPartitionedStream(t *testing.T) {
	ca := peertlstest.Authority(t)
	p := &raftport.Partition{}
	a := startPort(t, "127.0.0.1", raftport.MuxOptions(3, peertlstest.Node(t, ca, "n1"), discard))
	b := startPort(t, "127.0.0.1", raftport.MuxOptions(3, peertlstest.Node(t, ca, "n2"), discard))
	serveTagged(b.layer(t, "rpc", p), "rpc@b")
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	conn, err := a.layer(t, "rpc", p).DialContext(ctx, "tcp", b.addr)
	require.NoError(t, err)
	defer conn.Close()
	cert := raftmux.PeerCertificate(conn)
	require.NotNil(t, cert, "a stream of a partitioned layer still shows its peer's certificate (peer proofs need it)")
	assert.True(t, peertls.Names(cert, "n2"))
	greets(t, conn, "rpc@b")
}

// Layer.Dial, the raft.StreamLayer method, takes a timeout of 0 for none,
// as raft's own TCPStreamLayer (net.DialTimeout) and the raftmux layer it
// wraps do.
func TestLayerDialWithoutATimeoutReachesThePeer(t *testing.T) {
	a := startPort(t, "127.0.0.1", raftmux.Options{Logger: discard})
	b := startPort(t, "127.0.0.1", raftmux.Options{Logger: discard})
	serveTagged(b.layer(t, raftport.RaftLayer, nil), "raft@b")
	conn, err := a.layer(t, raftport.RaftLayer, nil).Dial(raft.ServerAddress(b.addr), 0)
	require.NoError(t, err, "a zero timeout means none, as for the raftmux layer underneath")
	defer conn.Close()
	greets(t, conn, "raft@b")
}

// ---- Partition

func TestAZeroOrNilPartitionCutsNothing(t *testing.T) {
	var nilP *raftport.Partition
	assert.False(t, nilP.Cut("a:1", "b:1"))
	var zero raftport.Partition
	assert.False(t, zero.Cut("a:1", "b:1"))
	zero.Heal() // healing nothing is fine
	assert.False(t, zero.Cut("a:1", "b:1"))

	// Layers without a partition (production) dial as usual.
	a := startPort(t, "127.0.0.1", raftmux.Options{Logger: discard})
	b := startPort(t, "127.0.0.1", raftmux.Options{Logger: discard})
	serveTagged(b.layer(t, raftport.RaftLayer, nil), "raft@b")
	conn, err := a.layer(t, raftport.RaftLayer, nil).Dial(raft.ServerAddress(b.addr), failsafe)
	require.NoError(t, err)
	defer conn.Close()
	greets(t, conn, "raft@b")
}

func TestIsolateCutsEveryLinkToAndFromAnAddressUntilHeal(t *testing.T) {
	const a, b, c = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
	var p raftport.Partition
	p.Isolate(b)
	assert.True(t, p.Cut(a, b))
	assert.True(t, p.Cut(b, a), "both directions")
	assert.True(t, p.Cut(c, b))
	assert.False(t, p.Cut(a, c), "links between others stay up")
	assert.False(t, p.Cut(b, b), "a node always reaches itself")

	p.Isolate(c)
	assert.True(t, p.Cut(a, c))
	assert.True(t, p.Cut(b, c))
	assert.True(t, p.Cut(a, b), "isolating c left b isolated")

	p.Heal()
	for _, link := range [][2]string{{a, b}, {b, a}, {a, c}, {c, b}} {
		assert.False(t, p.Cut(link[0], link[1]), "healed %v", link)
	}
	p.Isolate(a) // the table works again after Heal
	assert.True(t, p.Cut(b, a))
	assert.False(t, p.Cut(b, c))
}

// trio is three nodes with raft layers that share a partition table, each
// answering with its name.
type trio struct {
	p      *raftport.Partition
	ports  map[string]*port
	layers map[string]*raftport.Layer
	ended  map[string]<-chan struct{}
	ofAddr map[string]string
}

func startTrio(t *testing.T) *trio {
	tr := &trio{p: &raftport.Partition{}, ports: map[string]*port{}, layers: map[string]*raftport.Layer{},
		ended: map[string]<-chan struct{}{}, ofAddr: map[string]string{}}
	for _, name := range []string{"a", "b", "c"} {
		pt := startPort(t, "127.0.0.1", raftmux.Options{Logger: discard})
		tr.ports[name] = pt
		tr.layers[name] = pt.layer(t, raftport.RaftLayer, tr.p)
		tr.ended[name] = serveTagged(tr.layers[name], name)
		tr.ofAddr[name] = pt.addr
	}
	return tr
}

// dial opens a stream from node from to node to through from's layer.
func (tr *trio) dial(from, to string) (net.Conn, error) {
	return tr.layers[from].Dial(raft.ServerAddress(tr.ofAddr[to]), failsafe)
}

func requireDialCut(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	var op *net.OpError
	require.True(t, errors.As(err, &op), "a cut dial fails as a dial (callers treat it as unreachable): %v", err)
	assert.Equal(t, "dial", op.Op)
}

func TestACutLinkFailsDialsBothWaysAndHealRestoresThem(t *testing.T) {
	tr := startTrio(t)
	conn, err := tr.dial("a", "b")
	require.NoError(t, err)
	greets(t, conn, "b")
	conn.Close()

	// The mux counts a stream just after handing it over.
	require.Eventually(t, func() bool { return tr.ports["b"].mux.Stats().Accepted == 1 }, failsafe, time.Millisecond)
	tr.p.Isolate(tr.ofAddr["b"])
	before := tr.ports["b"].mux.Stats()
	_, err = tr.dial("a", "b")
	requireDialCut(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	_, err = tr.layers["b"].DialContext(ctx, "tcp", tr.ofAddr["a"])
	requireDialCut(t, err)
	after := tr.ports["b"].mux.Stats()
	assert.Equal(t, before.Accepted, after.Accepted, "no stream reached the isolated node")

	conn, err = tr.dial("a", "c")
	require.NoError(t, err, "links between others stay up")
	greets(t, conn, "c")
	conn.Close()

	tr.p.Heal()
	for _, link := range [][2]string{{"a", "b"}, {"b", "a"}, {"b", "c"}} {
		conn, err := tr.dial(link[0], link[1])
		require.NoError(t, err, "healed %v", link)
		greets(t, conn, link[1])
		conn.Close()
	}
}

func TestACutLinkBreaksStreamsAlreadyDialledAcrossIt(t *testing.T) {
	tr := startTrio(t)
	ab, err := tr.dial("a", "b")
	require.NoError(t, err)
	defer ab.Close()
	greets(t, ab, "b")
	ba, err := tr.dial("b", "a")
	require.NoError(t, err)
	defer ba.Close()
	greets(t, ba, "a")
	ac, err := tr.dial("a", "c")
	require.NoError(t, err)
	defer ac.Close()
	greets(t, ac, "c")

	tr.p.Isolate(tr.ofAddr["b"])
	// Deadlines turn a stream the cut missed into a failure, not a hang.
	require.NoError(t, ab.SetDeadline(time.Now().Add(failsafe)))
	require.NoError(t, ba.SetDeadline(time.Now().Add(failsafe)))
	_, err = ab.Write([]byte("ping"))
	assert.ErrorIs(t, err, net.ErrClosed, "write from a to b")
	_, err = ba.Read(make([]byte, 1))
	assert.ErrorIs(t, err, net.ErrClosed, "read by b from a")
	select {
	case <-tr.ended["b"]:
	case <-time.After(failsafe):
		require.FailNow(t, "b's end of the stream from a is still open")
	}
	select {
	case <-tr.ended["a"]:
	case <-time.After(failsafe):
		require.FailNow(t, "a's end of the stream from b is still open")
	}
	echoes(t, ac) // a's stream to c carries on

	tr.p.Heal()
	_, err = ab.Write([]byte("ping"))
	assert.Error(t, err, "a broken stream stays broken after Heal")
	conn, err := tr.dial("a", "b")
	require.NoError(t, err, "new streams cross the healed link")
	defer conn.Close()
	greets(t, conn, "b")
}

func TestPartitionIsSafeForConcurrentUse(t *testing.T) {
	var p raftport.Partition
	addrs := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	var wg sync.WaitGroup
	var cutSelf atomic.Bool
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 500 {
				a := addrs[(i+j)%len(addrs)]
				switch j % 5 {
				case 0:
					p.Isolate(a)
				case 1:
					p.Heal()
				default:
					if p.Cut(a, a) {
						cutSelf.Store(true)
					}
					p.Cut(a, addrs[(i+j+1)%len(addrs)])
				}
			}
		}()
	}
	wg.Wait()
	assert.False(t, cutSelf.Load(), "a node never lost its link to itself")
	p.Heal()
	assert.False(t, p.Cut(addrs[0], addrs[1]))
}
