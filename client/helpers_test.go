package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/clustertest"
	"github.com/quorate/quorate/server/httpapi"
)

// live is a real cluster (real raft, log stores in t.TempDir(), loopback
// sockets) with each node's HTTP API served on its advertised address, so
// that GET /v1/routes names servers that answer.
type live struct {
	nodes []*cluster.Node
	srvs  []*httptest.Server
	urls  []string
}

// startLive starts size nodes on clock (the default policy: capacity 10,
// no refill, so only the test moves balances).
func startLive(t *testing.T, size int, clock clock.Clock) *live {
	t.Helper()
	lns := make([]net.Listener, size)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns[i] = ln
	}
	def, err := bucket.NewConfig(bucket.Policy{Capacity: 10})
	require.NoError(t, err)
	nodes := clustertest.StartCluster(t, size, func(i int) cluster.Options {
		return cluster.Options{HTTPAddr: lns[i].Addr().String(), Clock: clock, Registerer: prometheus.NewRegistry(), Initial: def}
	})
	l := &live{nodes: nodes}
	for i, n := range nodes {
		reg := prometheus.NewRegistry()
		srv := httptest.NewUnstartedServer(httpapi.New(n, httpapi.Options{Registerer: reg, Gatherer: reg}))
		srv.Listener.Close()
		srv.Listener = lns[i]
		srv.Start()
		t.Cleanup(srv.Close) // before the node's own cleanup
		l.srvs = append(l.srvs, srv)
		l.urls = append(l.urls, srv.URL)
	}
	return l
}

// kill stops node i's HTTP server and the node.
func (l *live) kill(t *testing.T, i int) {
	t.Helper()
	l.srvs[i].Close()
	require.NoError(t, l.nodes[i].Close())
}

// leaderOf returns the index of the node whose routes name as client's
// group's leader, from node from's view.
func (l *live) leaderOf(t *testing.T, from int, client string) int {
	t.Helper()
	rt := l.nodes[from].Routes()
	addr := rt.Leaders[cluster.GroupOf(client, rt.Groups)]
	for i, u := range l.urls {
		if u == "http://"+addr {
			return i
		}
	}
	t.Fatalf("no node serves %s's group (routes %v)", client, rt.Leaders)
	return -1
}

// balance reads id's balance through node i's API.
func (l *live) balance(t *testing.T, i int, id string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := client.NewNode(l.urls[i], nil).GetClient(ctx, id)
	require.NoError(t, err)
	return v.Remaining
}

// setDefault installs p as the default policy.
func (l *live) setDefault(t *testing.T, p bucket.Policy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ch, err := client.NewNode(l.urls[0], nil).PutDefault(ctx, p, bucket.Keep)
	require.NoError(t, err)
	require.Empty(t, ch.Lagging)
}

// deadURL is a loopback URL nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	return u
}

// dropFirstAnswers is a proxy in front of upstream that passes every
// POST /v1/allow on, reads the node's answer (so the decision was made)
// and, for the first drops calls, closes the connection instead of
// answering. It answers GET /v1/routes 503, so a client cannot go around it.
func dropFirstAnswers(t *testing.T, upstream string, drops int) *httptest.Server {
	t.Helper()
	var left atomic.Int32
	left.Store(int32(drops))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/routes" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeUnavailable, Message: "no routes through this proxy"}})
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), r.Body)
		if err != nil {
			panic(err)
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			panic(err)
		}
		if left.Add(-1) >= 0 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}
