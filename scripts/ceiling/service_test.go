package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/server/httpapi"
)

// t0 is the fixed start of every test's clock.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newCeiling serves a Service on a loopback httptest server and returns a
// client for it and the Service's clock.
func newCeiling(t *testing.T) (*client.Node, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: t0}
	svc, err := New(Options{Shards: 4, Now: clk.now})
	require.NoError(t, err)
	ts := httptest.NewServer(httpapi.New(svc, httpapi.Options{}))
	t.Cleanup(ts.Close)
	return client.NewNode(ts.URL, ts.Client()), clk
}

// step is one request of a table: move the clock by advance, run before
// (a policy change), then ask for cost and expect the answer.
type step struct {
	advance   time.Duration
	before    func(t *testing.T)
	client    string
	cost      int64
	allowed   bool
	remaining int64
	limit     int64
	tier      string
}

func runSteps(t *testing.T, c *client.Node, clk *fakeClock, steps []step) {
	t.Helper()
	for i, st := range steps {
		clk.advance(st.advance)
		if st.before != nil {
			st.before(t)
		}
		got, err := c.Allow(context.Background(), st.client, st.cost, "")
		require.NoError(t, err, "step %d", i)
		at := clk.now().Sub(t0)
		assert.Equal(t, st.allowed, got.Allowed, "step %d at %v: Allow(%s, %d).Allowed", i, at, st.client, st.cost)
		assert.Equal(t, st.remaining, got.Remaining, "step %d at %v: Allow(%s, %d).Remaining", i, at, st.client, st.cost)
		assert.Equal(t, st.limit, got.Limit, "step %d at %v: Allow(%s, %d).Limit", i, at, st.client, st.cost)
		assert.Equal(t, st.tier, got.Tier, "step %d at %v: Allow(%s, %d).Tier", i, at, st.client, st.cost)
	}
}

// TestWorkedExample is README.md's worked example ("Try it") against the
// ceiling, over real HTTP: it must decide exactly as quorate does.
func TestWorkedExample(t *testing.T) {
	c, clk := newCeiling(t)
	ctx := context.Background()
	setFree := func(capacity int64) func(t *testing.T) {
		return func(t *testing.T) {
			_, err := c.PutTier(ctx, "free", bucket.Policy{Capacity: capacity, Rate: bucket.Scale}, bucket.Keep)
			require.NoError(t, err)
		}
	}
	setFree(5)(t)
	require.NoError(t, c.SetClientTier(ctx, "alice", "free"))

	runSteps(t, c, clk, []step{
		// t=0: five admitted, the sixth denied.
		{client: "alice", cost: 1, allowed: true, remaining: 4, limit: 5, tier: "free"},
		{client: "alice", cost: 1, allowed: true, remaining: 3, limit: 5, tier: "free"},
		{client: "alice", cost: 1, allowed: true, remaining: 2, limit: 5, tier: "free"},
		{client: "alice", cost: 1, allowed: true, remaining: 1, limit: 5, tier: "free"},
		{client: "alice", cost: 1, allowed: true, remaining: 0, limit: 5, tier: "free"},
		{client: "alice", cost: 1, allowed: false, remaining: 0, limit: 5, tier: "free"},
		// t=2s: two admitted, the third denied.
		{advance: 2 * time.Second, client: "alice", cost: 1, allowed: true, remaining: 1, limit: 5, tier: "free"},
		{client: "alice", cost: 1, allowed: true, remaining: 0, limit: 5, tier: "free"},
		{client: "alice", cost: 1, allowed: false, remaining: 0, limit: 5, tier: "free"},
		// Raise free to 10: the balance goes on from 0, it does not jump to 10.
		{before: setFree(10), client: "alice", cost: 0, allowed: true, remaining: 0, limit: 10, tier: "free"},
		{advance: 3 * time.Second, client: "alice", cost: 0, allowed: true, remaining: 3, limit: 10, tier: "free"},
		// Lower free to 2: clamped to 2 at once.
		{before: setFree(2), client: "alice", cost: 0, allowed: true, remaining: 2, limit: 2, tier: "free"},
		{client: "alice", cost: 1, allowed: true, remaining: 1, limit: 2, tier: "free"},
		// No tier: the built-in default (10, 1/s).
		{client: "bob", cost: 1, allowed: true, remaining: 9, limit: 10, tier: "default"},
		// A clock that steps back refills nobody.
		{advance: -time.Hour, client: "alice", cost: 1, allowed: true, remaining: 0, limit: 2, tier: "free"},
		{client: "alice", cost: 1, allowed: false, remaining: 0, limit: 2, tier: "free"},
	})

	view, err := c.GetClient(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, "free", view.AssignedTier)
	assert.Equal(t, int64(0), view.Remaining)
	assert.True(t, view.Known)
}

// TestRequestIDsAndBatches checks idempotent retries, a batch spread over
// shards, and the configuration endpoints.
func TestRequestIDsAndBatches(t *testing.T) {
	c, clk := newCeiling(t)
	ctx := context.Background()

	first, err := c.Allow(ctx, "carol", 4, "r1")
	require.NoError(t, err)
	again, err := c.Allow(ctx, "carol", 4, "r1")
	require.NoError(t, err)
	assert.False(t, first.Duplicate)
	assert.True(t, again.Duplicate, "a retry with the same request id")
	assert.Equal(t, first.Remaining, again.Remaining, "the original decision, nothing taken")
	clk.advance(3 * time.Minute)
	later, err := c.Allow(ctx, "carol", 4, "r1")
	require.NoError(t, err)
	assert.False(t, later.Duplicate, "forgotten after the dedup window")

	var reqs []api.AllowRequest
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "a"} {
		reqs = append(reqs, api.AllowRequest{Client: id})
	}
	res, err := c.AllowBatch(ctx, reqs)
	require.NoError(t, err)
	require.Len(t, res, len(reqs))
	assert.Equal(t, int64(9), res[0].Remaining, "a's first")
	assert.Equal(t, int64(8), res[6].Remaining, "a's second, in order")

	_, err = c.DeleteTier(ctx, "nope")
	var apiErr *client.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, api.CodeTierNotFound, apiErr.Code)
	_, err = c.PutDefault(ctx, bucket.Policy{Capacity: 0, Rate: 1}, bucket.Keep)
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, api.CodeInvalidPolicy, apiErr.Code)
	cc, err := c.PutDefault(ctx, bucket.Policy{Capacity: 3, Rate: bucket.Scale}, bucket.Keep)
	require.NoError(t, err)
	tiers, err := c.Tiers(ctx)
	require.NoError(t, err)
	assert.Equal(t, cc.Version, tiers.Version)
	assert.Equal(t, int64(3), tiers.Default.Capacity)
	require.NoError(t, c.Ready(ctx))
}
