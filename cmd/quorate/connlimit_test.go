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
