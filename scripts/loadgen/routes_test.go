package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/quorate/quorate/internal/grouphash"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRouterSendsEachKeyToItsGroupsLeader(t *testing.T) {
	var leaders atomic.Value
	leaders.Store(`{"0":"http://127.0.0.1:1","1":"http://127.0.0.2:1"}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/routes", r.URL.Path)
		fmt.Fprintf(w, `{"groups":3,"hash":"fnv1a64-mod","version":7,"leaders":%s}`, leaders.Load())
	}))
	defer srv.Close()
	r, err := newRouter(context.Background(), srv.Client(), srv.URL)
	require.NoError(t, err)

	seen := map[string]int{}
	for i := range 300 {
		key := fmt.Sprintf("load-%d", i)
		got := r.target(key, "http://fallback")
		want := map[uint64]string{0: "http://127.0.0.1:1", 1: "http://127.0.0.2:1", 2: "http://fallback"}[uint64(grouphash.Of(key, 3))]
		assert.Equal(t, want, got, key)
		seen[got]++
	}
	assert.Len(t, seen, 3, "keys of every group, the leaderless one going to the caller's own target")

	leaders.Store(`{"0":"http://127.0.0.3:1","1":"http://127.0.0.3:1","2":"http://127.0.0.3:1"}`)
	require.NoError(t, r.read(context.Background()))
	assert.Equal(t, "http://127.0.0.3:1", r.target("load-1", "http://fallback"), "a new table is used at once")

	leaders.Store(`{"0":"http://10.0.0.1:1"}`)
	assert.Error(t, r.read(context.Background()), "a leader off loopback is refused")
	assert.Equal(t, "http://127.0.0.3:1", r.target("load-1", "http://fallback"), "and the old table kept")
}
