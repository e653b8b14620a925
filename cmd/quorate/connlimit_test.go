package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The HTTP port keeps at most --max-http-conns-per-ip connections from one
// address and --max-http-conns in all: one beyond is closed at once, and a
// caller from elsewhere is still served (19,980 idle connections used every
// file descriptor before, and 7 of 12 legitimate decisions failed).
func TestHTTPPortCapsConnections(t *testing.T) {
	addr := addrOn(t, "127.0.0.61")
	startChild(t, addr, "--data-dir", filepath.Join(t.TempDir(), "d"), "--raft-addr", addrOn(t, "127.0.0.61"),
		"--gossip-addr", addrOn(t, "127.0.0.61"), "--max-http-conns", "6", "--max-http-conns-per-ip", "3", "--log-level", "warn")
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	dial := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", net.JoinHostPort("127.0.0.61", port))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// closedByServer reports whether the server closed c without a word.
	closedByServer := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	var held []net.Conn
	for range 3 {
		held = append(held, dial("127.0.0.71"))
	}
	assert.True(t, closedByServer(dial("127.0.0.71")), "a fourth connection from one address is closed")
	for _, c := range held {
		assert.False(t, closedByServer(c), "the first three stay open")
	}
	for range 3 {
		held = append(held, dial("127.0.0.72"))
	}
	assert.True(t, closedByServer(dial("127.0.0.73")), "a seventh connection in all is closed")

	// Once one closes, its place is taken: a request from another address
	// is served.
	_ = held[0].Close()
	require.Eventually(t, func() bool {
		hc := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.74")}}).DialContext}, Timeout: time.Second}
		resp, err := hc.Get(fmt.Sprintf("http://%s/healthz", addr))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 20*time.Millisecond)
}

// The gRPC port counts its connections with the HTTP port's: with two HTTP
// connections held from one address, that address gets one gRPC
// connection of a per-address cap of 3, and a fourth is closed at once.
func TestGRPCPortSharesTheConnectionCaps(t *testing.T) {
	addr, grpcAddr := addrOn(t, "127.0.0.62"), addrOn(t, "127.0.0.62")
	startChild(t, addr, "--data-dir", filepath.Join(t.TempDir(), "d"), "--raft-addr", addrOn(t, "127.0.0.62"),
		"--gossip-addr", addrOn(t, "127.0.0.62"), "--grpc-addr", grpcAddr, "--max-http-conns-per-ip", "3", "--log-level", "warn")
	dial := func(to string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.75")}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", to)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// refused reports whether the server closed c before sending anything
	// (an admitted gRPC connection gets the server's HTTP/2 settings).
	refused := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := c.Read(make([]byte, 64))
		return n == 0 && err == io.EOF
	}
	// Two HTTP connections, each answered (so accepted and counted), held
	// open by keep-alive.
	for range 2 {
		c := dial(addr)
		_, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: 127.0.0.62\r\n\r\n"))
		require.NoError(t, err)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(make([]byte, 512))
		require.NoError(t, err)
		require.Positive(t, n)
	}
	g := dial(grpcAddr)
	assert.False(t, refused(g), "the third connection, on the gRPC port, is admitted")
	assert.True(t, refused(dial(grpcAddr)), "a fourth from the address is closed, whichever port")
	assert.True(t, refused(dial(addr)), "and on the HTTP port too")
}

// Without --max-http-conns, the cap is what a tenth of the memory budget
// holds at perConnMemory a connection (connections are not state the
// budget sheds), within the descriptors' half and never under 64.
func TestDefaultConnectionCapFollowsTheMemoryBudget(t *testing.T) {
	fds := defaultMaxHTTPConns(0)
	require.Positive(t, fds)
	assert.LessOrEqual(t, fds, 16384)
	for _, budget := range []int64{1 << 20, 64 << 20, 512 << 20, 4 << 30, 64 << 30} {
		n := defaultMaxHTTPConns(budget)
		assert.LessOrEqual(t, n, fds, "budget %d: within the descriptors' half", budget)
		assert.GreaterOrEqual(t, n, 64, "budget %d: never under the floor", budget)
		if n > 64 && n < fds {
			assert.LessOrEqual(t, int64(n)*perConnMemory, budget/10, "budget %d: a tenth of it holds the connections", budget)
			assert.Greater(t, int64(n+1)*perConnMemory, budget/10, "budget %d: and no fewer than fit", budget)
		}
	}
	assert.Less(t, defaultMaxHTTPConns(512<<20), fds, "a small budget caps below the descriptors")

	// A node of a 40 MiB budget keeps 102 connections open (40 MiB / 10 /
	// 40 KiB), far fewer than its descriptors allow, and closes one beyond
	// at once.
	addr := addrOn(t, "127.0.0.63")
	startChild(t, addr, "--data-dir", filepath.Join(t.TempDir(), "d"), "--raft-addr", addrOn(t, "127.0.0.63"),
		"--gossip-addr", addrOn(t, "127.0.0.63"), "--max-memory", fmt.Sprint(40<<20), "--log-level", "warn")
	want := int(40 << 20 / 10 / perConnMemory)
	require.Less(t, want, fds)
	var held []net.Conn
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	for len(held) < want {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		held = append(held, c)
	}
	extra, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = extra.Close() })
	// The readiness probe of startChild may hold one of the node's places.
	assert.True(t, closed(extra), "connection %d is closed", want+1)
	assert.False(t, closed(held[want-2]), "connection %d stays open", want-1)
}
