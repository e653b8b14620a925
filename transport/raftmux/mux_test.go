package raftmux_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/transport/raftmux"
)

func TestRefusedStreams(t *testing.T) {
	n := startNode(t, raftmux.Options{HeaderTimeout: 100 * time.Millisecond}, "echo")
	echo(n.layers["echo"])
	roundTrip(t, n.layers["echo"], n.addr())

	tests := []struct {
		name   string
		send   []byte
		reason string // logged with the remote address
	}{
		{"unknown name", header("nope"), `reason="unknown layer" layer=nope`},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), `bad magic`},
		{"empty name", header(""), `reason="empty name"`},
		{"partial magic", []byte("QR"), `reason="header timeout"`},
		{"partial name", header("echo")[:7], `reason="header timeout"`},
		{"nothing sent", nil, `reason="header timeout"`},
		{"closed before header", nil, `reason="closed before header"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := rawDial(t, n.addr(), tt.send)
			remote := "remote=" + conn.LocalAddr().String() + " "
			if tt.name == "closed before header" {
				require.NoError(t, conn.(*net.TCPConn).CloseWrite())
			}
			requireClosed(t, conn)
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				line, ok := n.logs.LineWith(remote)
				if assert.True(c, ok, "nothing logged for %s", remote) {
					assert.Contains(c, line, tt.reason)
				}
			}, failsafe, time.Millisecond)
			roundTrip(t, n.layers["echo"], n.addr())
		})
	}
}

func TestSlowHeaderDoesNotBlockOthers(t *testing.T) {
	n := startNode(t, raftmux.Options{HeaderTimeout: time.Hour}, "echo")
	echo(n.layers["echo"])

	silent := rawDial(t, n.addr(), nil)
	partial := rawDial(t, n.addr(), header("echo")[:5])
	roundTrip(t, n.layers["echo"], n.addr())

	// Close does not wait an hour for them: it closes them.
	require.NoError(t, n.mux.Close())
	requireClosed(t, silent)
	requireClosed(t, partial)
	require.NoError(t, n.waitServed(t))
}

func TestHeaderIsNotOverRead(t *testing.T) {
	// Bytes sent in the same packet as the header belong to the stream.
	n := startNode(t, raftmux.Options{}, "echo")
	echo(n.layers["echo"])
	conn := rawDial(t, n.addr(), append(header("echo"), "hello"...))
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(failsafe)))
	got := make([]byte, 5)
	_, err := io.ReadFull(conn, got)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
}

func TestLayerNames(t *testing.T) {
	n := startNode(t, raftmux.Options{}, "a")

	_, err := n.mux.Layer("a")
	require.ErrorIs(t, err, raftmux.ErrLayerExists)
	_, err = n.mux.Layer("")
	require.ErrorIs(t, err, raftmux.ErrInvalidName)
	_, err = n.mux.Layer(strings.Repeat("x", 256))
	require.ErrorIs(t, err, raftmux.ErrInvalidName)

	long, err := n.mux.Layer(strings.Repeat("x", 255))
	require.NoError(t, err)
	echo(long)
	roundTrip(t, long, n.addr())
	assert.Equal(t, strings.Repeat("x", 255), long.Name())
	assert.Equal(t, n.mux.Addr(), long.Addr())
}

func TestCloseLayer(t *testing.T) {
	n := startNode(t, raftmux.Options{}, "a", "b")
	a, b := n.layers["a"], n.layers["b"]
	aAccept := echo(a)
	echo(b)
	roundTrip(t, a, n.addr())

	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "Close is idempotent")
	requireErrClosed(t, aAccept)
	_, err := a.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = a.Dial("127.0.0.1:1", failsafe)
	require.ErrorIs(t, err, net.ErrClosed)

	// Streams for "a" are now refused; "b" is unaffected.
	requireClosed(t, rawDial(t, n.addr(), header("a")))
	roundTrip(t, b, n.addr())

	// The name is free again.
	a2, err := n.mux.Layer("a")
	require.NoError(t, err)
	echo(a2)
	roundTrip(t, a2, n.addr())
}

func TestCloseMux(t *testing.T) {
	n := startNode(t, raftmux.Options{}, "a", "b")
	aAccept, bAccept := echo(n.layers["a"]), echo(n.layers["b"])
	roundTrip(t, n.layers["a"], n.addr())

	// An accepted stream outlives the Mux: it belongs to its layer's owner.
	open, err := n.layers["b"].Dial(raft.ServerAddress(n.addr()), failsafe)
	require.NoError(t, err)
	defer open.Close()
	require.NoError(t, open.SetDeadline(time.Now().Add(failsafe)))
	echoes(t, open) // now it has been accepted, not just dialed

	require.NoError(t, n.mux.Close())
	require.NoError(t, n.waitServed(t))
	requireErrClosed(t, aAccept)
	requireErrClosed(t, bAccept)

	_, err = n.mux.Layer("c")
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = n.layers["a"].Dial(raft.ServerAddress(n.addr()), failsafe)
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = net.DialTimeout("tcp", n.addr(), failsafe)
	require.Error(t, err, "listener still open")

	echoes(t, open)
}

func TestDialContextCancelled(t *testing.T) {
	n := startNode(t, raftmux.Options{}, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := n.layers["a"].DialContext(ctx, "tcp", n.addr())
	require.ErrorIs(t, err, context.Canceled)
}

func TestHTTPOverLayer(t *testing.T) {
	server := startNode(t, raftmux.Options{}, "http")
	client := startNode(t, raftmux.Options{}, "http")

	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "hello "+r.URL.Path)
		}),
		ReadHeaderTimeout: failsafe,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(server.layers["http"]) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		<-served
	})

	transport := &http.Transport{DialContext: client.layers["http"].DialContext}
	t.Cleanup(transport.CloseIdleConnections)
	hc := &http.Client{Transport: transport, Timeout: failsafe}

	for range 2 { // the second request may reuse the pooled stream
		resp, err := hc.Get("http://" + server.addr() + "/v1/ping")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "hello /v1/ping", string(body))
	}
}

// requireErrClosed waits for an Accept error from echo and checks that it
// wraps net.ErrClosed.
func requireErrClosed(t *testing.T, acceptErr <-chan error) {
	t.Helper()
	select {
	case err := <-acceptErr:
		require.ErrorIs(t, err, net.ErrClosed)
	case <-time.After(failsafe):
		require.FailNow(t, "Accept did not return")
	}
}

// A mux closed while its Serve is starting: Serve returns nil, and Close
// either waits for the idle reaper or finds the mux closed before Serve
// starts it (the race detector saw Serve's start of it race Close's wait).
func TestCloseWhileServeStarts(t *testing.T) {
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		m := raftmux.New(ln, raftmux.Options{IdleTimeout: time.Minute})
		served := make(chan error, 1)
		go func() { served <- m.Serve() }()
		require.NoError(t, m.Close())
		select {
		case err := <-served:
			assert.NoError(t, err)
		case <-time.After(5 * time.Second):
			require.FailNow(t, "Serve did not return after Close")
		}
	}
}
