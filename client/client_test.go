package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/cluster/clock"
)

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// attempts records every attempt's node through a client.Trace.
type attempts struct {
	mu    sync.Mutex
	nodes []string
	errs  []*client.Error
}

func (a *attempts) ctx(ctx context.Context) context.Context {
	return client.WithTrace(ctx, &client.Trace{Attempt: func(node string, _ api.AllowRequest) func(client.AttemptResult) {
		return func(r client.AttemptResult) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.nodes = append(a.nodes, node)
			a.errs = append(a.errs, r.Err)
		}
	}})
}

func TestAllowGoesStraightToTheGroupsLeader(t *testing.T) {
	l := startLive(t, 3, clock.NewManual())
	c := newClient(t, client.Config{Endpoints: l.urls[:1]}) // one endpoint: the routes name the rest
	require.NoError(t, c.Refresh(context.Background()))

	for i := range 12 {
		id := "route-" + string(rune('a'+i))
		var a attempts
		d, err := c.Allow(a.ctx(context.Background()), id, 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed, id)
		assert.Equal(t, int64(9), d.Remaining, id)
		assert.Equal(t, []string{l.urls[l.leaderOf(t, 0, id)]}, a.nodes, "%s: one attempt, at its group's leader", id)
	}
	st := c.Stats()
	assert.Equal(t, uint64(12), st.Decided)
	assert.Equal(t, uint64(12), st.Attempts)
	assert.Zero(t, st.Retries)
}

func TestALostAnswerIsRetriedWithTheSameRequestIDAndSpendsOnce(t *testing.T) {
	l := startLive(t, 1, clock.NewManual())
	proxy := dropFirstAnswers(t, l.urls[0], 1)
	c := newClient(t, client.Config{Endpoints: []string{proxy.URL}})

	var a attempts
	d, err := c.Allow(a.ctx(context.Background()), "lost", 3)
	require.NoError(t, err)
	require.Len(t, a.errs, 2, "the attempt whose answer was lost, then its retry")
	require.NotNil(t, a.errs[0])
	assert.Equal(t, api.Unknown, a.errs[0].Kind(), "a request that reached the node and got no answer may have been decided")
	assert.Nil(t, a.errs[1])
	assert.True(t, d.Allowed)
	assert.True(t, d.Duplicate, "the retry found the first attempt's decision")
	assert.Equal(t, int64(7), d.Remaining)
	assert.Equal(t, int64(7), l.balance(t, 0, "lost"), "spent once, not twice")
}

func TestAllowFailsOverWhenTheLeaderDies(t *testing.T) {
	l := startLive(t, 3, clock.NewManual())
	c := newClient(t, client.Config{Endpoints: l.urls})
	require.NoError(t, c.Refresh(context.Background()))
	const id = "failover"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Allow(ctx, id, 2)
	require.NoError(t, err)

	dead := l.leaderOf(t, 0, id)
	l.kill(t, dead)
	d, err := c.Allow(ctx, id, 2)
	require.NoError(t, err)
	assert.False(t, d.Degraded, "decided by the cluster after the election")
	assert.True(t, d.Allowed)
	assert.Equal(t, int64(6), d.Remaining, "the new leader has the balance the old one left")

	// Once the routes are refreshed the next call goes to the new leader
	// at once.
	survivor := (dead + 1) % 3
	require.Eventually(t, func() bool {
		var a attempts
		_, err := c.Allow(a.ctx(ctx), id, 0)
		return err == nil && len(a.nodes) == 1 && a.nodes[0] == l.urls[l.leaderOf(t, survivor, id)]
	}, 10*time.Second, 10*time.Millisecond)
}

func TestOnUnavailable(t *testing.T) {
	dead := []string{deadURL(t), deadURL(t)}
	for _, tc := range []struct {
		mode    client.Mode
		allowed bool
		stat    func(client.Stats) uint64
	}{
		{client.FailClosed, false, func(s client.Stats) uint64 { return s.FailedClosed }},
		{client.FailOpen, true, func(s client.Stats) uint64 { return s.FailedOpen }},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			c := newClient(t, client.Config{Endpoints: dead, OnUnavailable: tc.mode})
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			d, err := c.Allow(ctx, "anyone", 1)
			require.NoError(t, err, "no node decided: the mode answers")
			assert.Equal(t, tc.allowed, d.Allowed)
			assert.True(t, d.Degraded)
			assert.Equal(t, uint64(1), tc.stat(c.Stats()))
			assert.Zero(t, c.Stats().Decided)
			assert.GreaterOrEqual(t, c.Stats().Attempts, uint64(2), "every node was tried")
		})
	}
}

func TestFailLocalSharesTheTiersPolicyAmongInstances(t *testing.T) {
	l := startLive(t, 1, clock.NewManual())
	l.setDefault(t, bucket.Policy{Capacity: 10, Rate: bucket.Scale}) // 1 token/s; the node's clock does not move
	fixed := time.Unix(1_800_000_000, 0)
	c := newClient(t, client.Config{Endpoints: l.urls, OnUnavailable: client.FailLocal, Instances: 2,
		Now: func() time.Time { return fixed }})

	d, err := c.Allow(context.Background(), "local", 1)
	require.NoError(t, err)
	require.False(t, d.Degraded)
	require.Equal(t, "1", d.RefillPerSecond.String(), "the answer says the tier's rate")
	l.kill(t, 0)

	var allowed int
	for range 8 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		d, err := c.Allow(ctx, "local", 1)
		cancel()
		require.NoError(t, err)
		require.True(t, d.Degraded)
		assert.Equal(t, int64(5), d.Limit, "capacity 10 shared by 2 instances")
		if d.Allowed {
			allowed++
		}
	}
	assert.Equal(t, 5, allowed, "a full local bucket of 5, no time passing")
	assert.Equal(t, uint64(8), c.Stats().FailedLocal)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	d, err = c.Allow(ctx, "never-seen", 1)
	require.NoError(t, err)
	assert.True(t, d.Allowed, "a client the cluster never answered for gets the default policy's share")
	assert.Equal(t, int64(5), d.Limit)

	fresh := newClient(t, client.Config{Endpoints: l.urls, OnUnavailable: client.FailLocal})
	d, err = fresh.Allow(ctx, "local", 1)
	require.NoError(t, err)
	assert.False(t, d.Allowed, "a client that learned no policy and has no LocalPolicy denies")
	assert.True(t, d.Degraded)
}

// A sliding window is learned from its answers (limit and window_seconds)
// and shared among instances like a bucket: limit/N at once.
func TestFailLocalLearnsASlidingWindow(t *testing.T) {
	l := startLive(t, 1, clock.NewManual())
	window := bucket.Policy{Algorithm: bucket.SlidingWindow, Capacity: 6, Window: 60 * bucket.Second}
	admin := client.NewNode(l.urls[0], nil)
	require.Eventually(t, func() bool {
		_, err := admin.PutDefault(context.Background(), window, bucket.Keep)
		return err == nil // 409 cluster_version until the node has raised it
	}, 10*time.Second, 10*time.Millisecond)
	fixed := time.Unix(1_800_000_000, 0)
	c := newClient(t, client.Config{Endpoints: l.urls, OnUnavailable: client.FailLocal, Instances: 2,
		Now: func() time.Time { return fixed }})
	d, err := c.Allow(context.Background(), "w", 1)
	require.NoError(t, err)
	require.Equal(t, int64(60), d.WindowSeconds)
	require.Empty(t, d.RefillPerSecond)
	l.kill(t, 0)

	var allowed int
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		d, err := c.Allow(ctx, "w", 1)
		cancel()
		require.NoError(t, err)
		require.True(t, d.Degraded)
		assert.Equal(t, int64(3), d.Limit, "a limit of 6 shared by 2 instances")
		if d.Allowed {
			allowed++
		}
	}
	assert.Equal(t, 3, allowed)
}

func TestARefusedRequestIsNotRetried(t *testing.T) {
	l := startLive(t, 1, clock.NewManual())
	c := newClient(t, client.Config{Endpoints: l.urls})
	_, err := c.Allow(context.Background(), strings.Repeat("x", api.MaxClientLen+1), 1)
	require.Error(t, err)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, api.Refused, e.Kind())
	assert.Equal(t, api.CodeInvalidClient, e.Code)
	assert.Equal(t, uint64(1), c.Stats().Attempts)
	assert.Equal(t, uint64(1), c.Stats().Refused)
}

func TestConcurrentCallsAdmitExactlyTheCapacity(t *testing.T) {
	for _, coalesce := range []bool{true, false} {
		t.Run(map[bool]string{true: "coalesced", false: "one call each"}[coalesce], func(t *testing.T) {
			l := startLive(t, 1, clock.NewManual())
			c := newClient(t, client.Config{Endpoints: l.urls, NoCoalesce: !coalesce})
			var (
				wg      sync.WaitGroup
				allowed atomic.Int64
			)
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 4 {
						d, err := c.Allow(context.Background(), "hot", 1)
						if assert.NoError(t, err) && assert.False(t, d.Degraded) && d.Allowed {
							allowed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			assert.Equal(t, int64(10), allowed.Load(), "128 calls for a bucket of 10 that does not refill")
			assert.Equal(t, int64(0), l.balance(t, 0, "hot"))
			st := c.Stats()
			assert.Equal(t, uint64(128), st.Decided)
			if !coalesce {
				assert.Zero(t, st.Batches)
			}
		})
	}
}

func TestNewRefusesABadConfig(t *testing.T) {
	for name, cfg := range map[string]client.Config{
		"no endpoints":     {},
		"empty endpoint":   {Endpoints: []string{" "}},
		"not http":         {Endpoints: []string{"ftp://q:1"}},
		"unknown mode":     {Endpoints: []string{"q:1"}, OnUnavailable: client.Mode(7)},
		"bad local policy": {Endpoints: []string{"q:1"}, LocalPolicy: &bucket.Policy{}},
	} {
		_, err := client.New(cfg)
		assert.Error(t, err, name)
	}
}

// With BreakFor, a call no node decided opens a breaker: the calls after it
// are answered by OnUnavailable at once, making no attempt, until one probe
// per BreakFor finds the cluster again.
func TestABreakerAnswersAtOnceWhileTheClusterIsDown(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := newClient(t, client.Config{Endpoints: []string{deadURL(t)}, OnUnavailable: client.FailOpen, BreakFor: time.Minute, Now: clock})
	call := func() api.AllowResponse {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		d, err := c.Allow(ctx, "k", 1)
		require.NoError(t, err)
		return d
	}
	require.True(t, call().Degraded)
	attempts := c.Stats().Attempts
	require.Positive(t, attempts)

	for range 5 {
		d := call()
		assert.True(t, d.Allowed && d.Degraded)
	}
	assert.Equal(t, attempts, c.Stats().Attempts, "the open breaker made no attempt")
	assert.Equal(t, uint64(5), c.Stats().Broken)

	advance(time.Minute)
	call() // the probe
	assert.Greater(t, c.Stats().Attempts, attempts, "a probe when the breaker's time was up")
	probed := c.Stats().Attempts
	call()
	assert.Equal(t, probed, c.Stats().Attempts, "the failed probe opened it again")
	assert.Equal(t, uint64(6), c.Stats().Broken)
}

// The first decision after an outage closes the breaker: the calls after
// the successful probe go to the cluster again.
func TestABreakerClosesWhenTheClusterDecidesAgain(t *testing.T) {
	l := startLive(t, 1, clock.NewManual())
	var down atomic.Bool
	down.Store(true)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"down for the test"}}`)
			return
		}
		l.srvs[0].Config.Handler.ServeHTTP(w, r)
	}))
	defer front.Close()
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := newClient(t, client.Config{Endpoints: []string{front.URL}, OnUnavailable: client.FailClosed, BreakFor: time.Minute, Now: clock})
	call := func() api.AllowResponse {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		d, err := c.Allow(ctx, "k", 1)
		require.NoError(t, err)
		return d
	}
	require.True(t, call().Degraded, "down: denied by FailClosed")
	require.True(t, call().Degraded)
	require.Equal(t, uint64(1), c.Stats().Broken)

	down.Store(false)
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	d := call()
	assert.False(t, d.Degraded, "the probe was decided")
	assert.True(t, d.Allowed)
	for range 3 {
		assert.False(t, call().Degraded, "closed again: decided by the cluster")
	}
	assert.Equal(t, uint64(4), c.Stats().Decided)
}

// Two of three real nodes die: the survivor's groups cannot decide, and
// the server itself answers a tier with when_unavailable allow degraded,
// while a tier that denies gets the 503, which a FailClosed client turns
// into its own denial.
func TestTheServerAnswersDegradedForAnAllowTier(t *testing.T) {
	l := startLive(t, 3, clock.NewManual())
	admin := client.NewNode(l.urls[0], nil)
	ctx := context.Background()
	require.Eventually(t, func() bool {
		_, err := admin.PutTier(ctx, "open", bucket.Policy{Capacity: 5, Rate: bucket.Scale, WhenUnavailable: bucket.AllowDegraded}, bucket.Keep)
		return err == nil // 409 cluster_version until the cluster has raised it
	}, 10*time.Second, 10*time.Millisecond)
	_, err := admin.PutTier(ctx, "closed", bucket.Policy{Capacity: 5, Rate: bucket.Scale}, bucket.Keep)
	require.NoError(t, err)
	err = admin.SetClientTier(ctx, "o", "open")
	require.NoError(t, err)
	err = admin.SetClientTier(ctx, "c", "closed")
	require.NoError(t, err)
	require.Eventually(t, func() bool { // what the survivor's replicas will answer by
		o, _ := l.nodes[0].PolicyOf("o")
		c, _ := l.nodes[0].PolicyOf("c")
		return o == "open" && c == "closed"
	}, 10*time.Second, 5*time.Millisecond)

	l.kill(t, 1)
	l.kill(t, 2)
	c := newClient(t, client.Config{Endpoints: l.urls[:1], OnUnavailable: client.FailClosed, Timeout: 3 * time.Second})
	d, err := c.Allow(ctx, "o", 1)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.True(t, d.Degraded, "the server's degraded answer")
	assert.Equal(t, "open", d.Tier)
	assert.Zero(t, c.Stats().FailedClosed, "answered by the server, not by the client's fallback")
	d, err = c.Allow(ctx, "c", 1)
	require.NoError(t, err)
	assert.False(t, d.Allowed, "a tier that denies: nothing decided, the client fails closed")
	assert.Equal(t, uint64(1), c.Stats().FailedClosed)
}
