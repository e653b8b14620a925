package raftmux_test

import (
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/internal/logbuf"
	"github.com/quorate/quorate/transport/raftmux"
)

// failsafe bounds every wait in these tests. It only turns a hang into a
// failure; nothing waits for it to pass.
const failsafe = 5 * time.Second

// node is a Mux serving on loopback with some layers registered.
type node struct {
	mux    *raftmux.Mux
	layers map[string]*raftmux.Layer
	logs   *logbuf.Buffer

	served   chan struct{} // closed when Serve returns
	serveErr error
}

// startNode registers names on a new Mux on 127.0.0.1:0 and serves it. The
// Mux is closed at cleanup, and Serve must then have returned nil.
func startNode(t *testing.T, opts raftmux.Options, names ...string) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	n := &node{logs: &logbuf.Buffer{}, layers: make(map[string]*raftmux.Layer), served: make(chan struct{})}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	n.mux = raftmux.New(ln, opts)
	for _, name := range names {
		l, err := n.mux.Layer(name)
		require.NoError(t, err)
		n.layers[name] = l
	}
	go func() {
		defer close(n.served)
		n.serveErr = n.mux.Serve()
	}()
	t.Cleanup(func() {
		require.NoError(t, n.mux.Close())
		assert.NoError(t, n.waitServed(t))
	})
	return n
}

// addr returns the node's listening address as a string.
func (n *node) addr() string { return n.mux.Addr().String() }

// waitServed waits for Serve to return and returns its error.
func (n *node) waitServed(t *testing.T) error {
	t.Helper()
	select {
	case <-n.served:
		return n.serveErr
	case <-time.After(failsafe):
		require.FailNow(t, "Serve did not return")
		return nil
	}
}

// echo serves l by copying every stream back to its sender. The returned
// channel receives Accept's error once it fails.
func echo(l net.Listener) <-chan error {
	acceptErr := make(chan error, 1)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			go func() {
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
	return acceptErr
}

// roundTrip dials addr through l and checks that an echo comes back.
func roundTrip(t *testing.T, l *raftmux.Layer, addr string) {
	t.Helper()
	conn, err := l.Dial(raft.ServerAddress(addr), failsafe)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(failsafe)))
	echoes(t, conn)
}

// echoes checks that what is written to conn comes back.
func echoes(t *testing.T, conn net.Conn) {
	t.Helper()
	_, err := conn.Write([]byte("ping"))
	require.NoError(t, err)
	got := make([]byte, 4)
	_, err = io.ReadFull(conn, got)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(got))
}

// rawDial opens a plain TCP connection to addr and writes b.
func rawDial(t *testing.T, addr string, b []byte) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, failsafe)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	if len(b) > 0 {
		_, err = conn.Write(b)
		require.NoError(t, err)
	}
	return conn
}

// requireClosed checks that the peer of conn closes it: a read fails with
// EOF or a reset rather than running into the failsafe deadline.
func requireClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(failsafe)))
	n, err := conn.Read(make([]byte, 1))
	require.Error(t, err, "read %d bytes from a stream that should be closed", n)
	require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "stream still open after %v", failsafe)
}

// header builds a stream header by hand, as a peer would send it.
func header(name string) []byte {
	return append([]byte{'Q', 'R', 'M', '1', byte(len(name))}, name...)
}
