package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/clustertest"
	"github.com/quorate/quorate/server/httpapi"
)

// gate holds the first POST /v1/allow through it until released.
type gate struct {
	once    sync.Once
	release chan struct{}
	next    http.RoundTripper
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	first := false
	if r.URL.Path == "/v1/allow" {
		g.once.Do(func() { first = true })
	}
	if first {
		<-g.release
	}
	return g.next.RoundTrip(r)
}

// TestABatchRefusedForOneRequestDecidesTheOthers: decisions queued behind a
// call travel as one batch; a batch is refused as a whole for one bad
// request, so each then goes alone and only the bad one is refused.
func TestABatchRefusedForOneRequestDecidesTheOthers(t *testing.T) {
	reg := prometheus.NewRegistry()
	node := clustertest.StartNode(t, cluster.Options{Clock: clock.NewManual(), Registerer: reg})
	srv := httptest.NewServer(httpapi.New(node, httpapi.Options{Registerer: reg, Gatherer: reg}))
	defer srv.Close()
	g := &gate{release: make(chan struct{}), next: http.DefaultTransport}
	c, err := New(Config{Endpoints: []string{srv.URL}, MaxInflight: 1, HTTPClient: &http.Client{Transport: g}})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Refresh(ctx)) // so the lane's group is known before the first call

	type answer struct {
		d   api.AllowResponse
		err error
	}
	run := func(id string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			d, err := c.Allow(ctx, id, 1)
			ch <- answer{d, err}
		}()
		return ch
	}
	first := run("first")
	l := c.laneFor(srv.URL)
	require.Eventually(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.inflight == 1 }, 5*time.Second, time.Millisecond)
	// The lane is the node's: ids of any group queue behind first's call.
	bad, good := run(strings.Repeat("b", api.MaxClientLen+1)), run("good") // bad: one byte too long
	require.Eventually(t, func() bool { return l.queued() == 2 }, 5*time.Second, time.Millisecond)
	close(g.release)

	a := <-first
	require.NoError(t, a.err)
	assert.True(t, a.d.Allowed)
	a = <-good
	require.NoError(t, a.err)
	assert.True(t, a.d.Allowed, "decided alone after its batch was refused")
	a = <-bad
	var e *Error
	require.ErrorAs(t, a.err, &e)
	assert.Equal(t, api.CodeInvalidClient, e.Code)
	st := c.Stats()
	assert.Equal(t, uint64(1), st.Batches)
	assert.Equal(t, uint64(2), st.Batched)
}

// TestSettleWaitsWhileTheQueueGrows: after a call, a lane yields while
// decisions keep joining its queue, and no longer: not once the queue
// stops growing, not past a full batch, not past settleYields.
func TestSettleWaitsWhileTheQueueGrows(t *testing.T) {
	c, err := New(Config{Endpoints: []string{"http://127.0.0.1:1"}, MaxBatch: 8})
	require.NoError(t, err)
	defer c.Close()
	l := c.laneFor("http://127.0.0.1:1")
	yields := 0
	joinFor := func(n int) func() { // each of the first n yields lets one decision join
		return func() {
			yields++
			if yields <= n {
				l.mu.Lock()
				l.queue = append(l.queue, &item{})
				l.mu.Unlock()
			}
		}
	}

	l.yield = joinFor(3)
	l.settle()
	assert.Equal(t, 4, yields, "three yields that grew the queue, then one that did not")
	assert.Equal(t, 3, l.queued())

	l.queue, yields = nil, 0
	l.yield = joinFor(100)
	l.settle()
	assert.Equal(t, 7, yields, "a call takes 8: the first and 7 queued")
	assert.Equal(t, 7, l.queued())

	l.queue, yields = nil, 0
	l.yield = joinFor(0)
	l.settle()
	assert.Equal(t, 1, yields, "nobody came back: one yield")

	c.cfg.MaxBatch = 1000
	l.queue, yields = nil, 0
	l.yield = joinFor(100)
	l.settle()
	assert.Equal(t, settleYields, yields, "bounded while the queue keeps growing")
}
