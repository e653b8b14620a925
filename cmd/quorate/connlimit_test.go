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
