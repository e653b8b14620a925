package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/quorate/quorate/internal/freeport"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/clustertest"
	"github.com/quorate/quorate/server/httpapi"
)

// The example, run as its README line says, against a real node: a key's
// eleventh request in a moment is answered 429 (the built-in default: 10
// tokens), another key's is not.
func TestTheExampleLimitsByAPIKey(t *testing.T) {
	reg := prometheus.NewRegistry()
	node := clustertest.StartNode(t, cluster.Options{Clock: clock.NewManual(), Registerer: reg})
	q := httptest.NewServer(httpapi.New(node, httpapi.Options{Registerer: reg, Gatherer: reg}))
	defer q.Close()
	addr := freeport.Addr(t)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-quorate", q.URL, "-listen", addr}) }()
	get := func(key string) (int, http.Header) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		require.NoError(t, err)
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	require.Eventually(t, func() bool { s, _ := get("warmup"); return s == http.StatusOK }, 10*time.Second, 10*time.Millisecond)

	for i := range 10 {
		s, _ := get("alice")
		require.Equal(t, http.StatusOK, s, "request %d", i)
	}
	s, h := get("alice")
	assert.Equal(t, http.StatusTooManyRequests, s)
	assert.Equal(t, "1", h.Get("Retry-After"))
	assert.Equal(t, `"default";q=10;w=10`, h.Get("RateLimit-Policy"))
	s, _ = get("bob")
	assert.Equal(t, http.StatusOK, s, "bob has a bucket of his own")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the example did not stop")
	}
}
