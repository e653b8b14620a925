package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/internal/rtmetrics"
	"github.com/quorate/quorate/server/httpapi"
)

// The debug listener serves pprof: only to requests addressed to an IP or
// localhost (no DNS rebinding from a web page), only to admin tokens when
// the node has tokens, and only on loopback unless --insecure.
func TestDebugListenerIsGuarded(t *testing.T) {
	authFile := filepath.Join(t.TempDir(), "auth.json")
	admin := newToken(t, authFile, "ops", "admin")
	reader := newToken(t, authFile, "dash", "read")
	af, err := httpapi.ReadAuthFile(authFile)
	require.NoError(t, err)
	auth, err := httpapi.NewAuthenticator(af)
	require.NoError(t, err)
	h := debugGuard(debugMux(nil), auth)
	getPath := func(path, host, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = host
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	get := func(host, token string) int { return getPath("/debug/pprof/", host, token).Code }
	assert.Equal(t, http.StatusOK, get("127.0.0.1:7079", admin))
	rt := getPath(rtmetrics.Path, "127.0.0.1:7079", admin)
	assert.Equal(t, http.StatusOK, rt.Code, "the runtime's counters are served beside the profiles")
	assert.Contains(t, rt.Body.String(), rtmetrics.AllocObjects)
	assert.Equal(t, http.StatusUnauthorized, getPath(rtmetrics.Path, "127.0.0.1:7079", reader).Code, "and guarded as they are")
	assert.Equal(t, http.StatusOK, get("localhost:7079", admin))
	assert.Equal(t, http.StatusOK, get("[::1]:7079", admin))
	assert.Equal(t, http.StatusForbidden, get("rebound.example:7079", admin), "a DNS name of someone else's")
	assert.Equal(t, http.StatusUnauthorized, get("127.0.0.1:7079", ""))
	assert.Equal(t, http.StatusUnauthorized, get("127.0.0.1:7079", reader), "a read token may not profile the node")
	assert.Equal(t, http.StatusOK, debugGuardStatus(t, debugGuard(debugMux(nil), nil)), "without tokens, loopback callers are served")

	err = run(context.Background(), []string{"serve", "--data-dir", t.TempDir(), "--debug-addr", "10.1.2.3:7079"}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a loopback address")
	assert.Equal(t, 2, exitCode(err))
}

func debugGuardStatus(t *testing.T, h http.Handler) int {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil)
	r.Host = "127.0.0.1:7079"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}
