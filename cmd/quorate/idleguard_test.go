package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A connection that never carried a known token is closed once idle for
// unauthenticatedIdle; one that did keeps the server's idle timeout (finding
// 4 of the issue on resource limits: idle connections after one
// unauthenticated GET /healthz held the port).
func TestUnauthenticatedIdleConnectionsAreClosedSooner(t *testing.T) {
	was := unauthenticatedIdle
	unauthenticatedIdle = 300 * time.Millisecond
	t.Cleanup(func() { unauthenticatedIdle = was })
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.json")
	token := newToken(t, authFile, "web", "decide")
	_, addr, _ := startServe(t, "--data-dir", filepath.Join(dir, "d"), "--auth-file", authFile)

	// ask sends one request on c and reads its answer's status.
	ask := func(c net.Conn, path, bearer string) int {
		req, err := http.NewRequest("GET", "http://"+addr+path, nil)
		require.NoError(t, err)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		require.NoError(t, req.Write(c))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// closedWithin reports whether the server closes c within d.
	closedWithin := func(c net.Conn, d time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(d))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF)
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	anon, refused, authed := dial(), dial(), dial()
	require.Equal(t, http.StatusOK, ask(anon, "/healthz", ""))
	anonIdle := time.Now() // its idle time starts with its answer
	require.Equal(t, http.StatusUnauthorized, ask(refused, "/v1/tiers", "nope"))
	require.Equal(t, http.StatusUnauthorized, ask(authed, "/v1/tiers", ""))
	require.NotEqual(t, http.StatusUnauthorized, ask(authed, "/v1/routes", token), "then with a known token, on the same connection")
	assert.True(t, closedWithin(anon, 3*time.Second), "a connection that only asked /healthz is closed")
	assert.GreaterOrEqual(t, time.Since(anonIdle), 250*time.Millisecond, "after the idle time, not at once")
	assert.True(t, closedWithin(refused, 3*time.Second), "so is one whose token was unknown")
	assert.False(t, closedWithin(authed, time.Second), "a connection that carried a known token stays open")
}
