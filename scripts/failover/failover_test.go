package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/internal/clusterview"
)

func TestLeaderOf(t *testing.T) {
	follower := func(leader string, term uint64) clusterview.View {
		return clusterview.View{Groups: []clusterview.Group{{ID: "2", State: "Follower", Leader: leader, Term: term}}}
	}
	// The leader answered: its own view decides.
	views := map[string]clusterview.View{
		"node1": follower("node3", 5),
		"node3": {Groups: []clusterview.Group{{ID: "2", State: "Leader", Leader: "node3", Term: 6}}},
	}
	l, term, ok := leaderOf(views, "2")
	assert.True(t, ok)
	assert.Equal(t, "node3", l)
	assert.Equal(t, uint64(6), term)
	// It did not: the followers agree on it.
	views = map[string]clusterview.View{"node1": follower("node3", 5), "node2": follower("node3", 6)}
	l, term, ok = leaderOf(views, "2")
	assert.True(t, ok)
	assert.Equal(t, "node3", l)
	assert.Equal(t, uint64(6), term)
	// They do not agree.
	views["node2"] = follower("node1", 6)
	_, _, ok = leaderOf(views, "2")
	assert.False(t, ok)
}

// TestProbe checks one probe against a fake node: the request the client
// sends and how each answer is classified.
func TestProbe(t *testing.T) {
	answer := func(w http.ResponseWriter) {}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "POST /v1/allow", r.Method+" "+r.URL.Path)
		assert.Equal(t, strconv.Itoa(probeTimeoutMs), r.Header.Get(api.HeaderTimeout), "the server gives up before the client")
		assert.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		answer(w)
	}))
	defer ts.Close()
	hc := &http.Client{Transport: serverTimeout{http.DefaultTransport}}
	p := newProber(context.Background(), client.NewNode(ts.URL, hc, client.WithToken("tok")), "c1", time.Millisecond, time.Second)
	send := func() (int64, string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return p.send(ctx)
	}

	answer = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"allowed":true,"remaining":9,"limit":10,"tier":"default","stamp_unix_nano":42}`))
	}
	stamp, kind, text := send()
	assert.Equal(t, int64(42), stamp)
	assert.Empty(t, kind+text)

	answer = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"timeout","message":"no decision within 200ms"}}`))
	}
	_, kind, text = send()
	assert.Equal(t, "503 timeout", kind)
	assert.Contains(t, text, "no decision within 200ms")

	answer = func(w http.ResponseWriter) { http.Error(w, "bad gateway", http.StatusBadGateway) }
	_, kind, _ = send()
	assert.Equal(t, "502", kind, "not a quorate error body")

	answer = func(w http.ResponseWriter) { _, _ = w.Write([]byte(`{"allowed":true}`)) }
	_, kind, _ = send()
	assert.Equal(t, "bad answer", kind)

	ts.Close()
	_, kind, text = send()
	assert.Equal(t, "transport", kind)
	require.NotEmpty(t, text)
}
