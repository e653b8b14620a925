package client_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/cluster/clock"
)

func TestMiddlewareAnswers429WithTheRateLimitFields(t *testing.T) {
	l := startLive(t, 1, clock.NewManual())
	l.setDefault(t, bucket.Policy{Capacity: 2, Rate: bucket.Scale / 2}) // 0.5 token/s: empty to full in 4 s
	c := newClient(t, client.Config{Endpoints: l.urls})
	var served int
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		_, _ = io.WriteString(w, "hello")
	})
	srv := httptest.NewServer(client.Middleware(c, client.ByHeader("X-Api-Key"))(app))
	defer srv.Close()

	get := func(key string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		resp := get("k1")
		require.Equal(t, want, resp.StatusCode, "request %d", i)
		assert.Equal(t, "2", resp.Header.Get("RateLimit-Limit"), "request %d", i)
		assert.Equal(t, `"default";q=2;w=4`, resp.Header.Get("RateLimit-Policy"), "request %d", i)
		if want == http.StatusTooManyRequests {
			assert.Equal(t, "2", resp.Header.Get("Retry-After"), "one token at 0.5/s")
			assert.Equal(t, `"default";r=0;t=4`, resp.Header.Get("RateLimit"))
		}
	}
	assert.Equal(t, 2, served, "the denied request never reached the handler")
	assert.Equal(t, http.StatusOK, get("").StatusCode, "a request without a key is not limited")
	assert.Equal(t, 3, served)
}
