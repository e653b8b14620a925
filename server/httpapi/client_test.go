package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
)

func newTestClient(t *testing.T, svc Service) (*client.Node, *testServer) {
	t.Helper()
	ts := newTestServer(t, svc, Options{})
	return client.NewNode(ts.URL+"/", ts.Client()), ts
}

func TestClientRoundTrips(t *testing.T) {
	ctx := t.Context()
	svc, clk := newFSMService(t)
	c, _ := newTestClient(t, svc)

	cc, err := c.PutTier(ctx, "free", bucket.Policy{Capacity: 5, Rate: bucket.Scale / 4}, bucket.Keep)
	require.NoError(t, err)
	assert.Equal(t, api.ConfigChange{Version: 1, Applied: []string{"0"}}, cc)
	cc, err = c.PutDefault(ctx, bucket.Policy{Capacity: 3, Rate: 2 * bucket.Scale}, bucket.Keep)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), cc.Version)

	tiers, err := c.Tiers(ctx)
	require.NoError(t, err)
	assert.Equal(t, api.TiersResponse{
		Version: 2,
		Default: tokenBucketJSON(3, "2"),
		Tiers:   map[string]api.Policy{"free": tokenBucketJSON(5, "0.25")},
	}, tiers)
	p, err := tiers.Tiers["free"].Bucket()
	require.NoError(t, err)
	assert.Equal(t, bucket.Policy{Capacity: 5, Rate: bucket.Scale / 4}, p, "api.Policy round trip")

	// Client ids that need escaping in a path.
	for _, id := range []string{"alice", "a/b", "ü x?#%", ".", "..", "a/../b"} {
		require.NoError(t, c.SetClientTier(ctx, id, "free"), id)
		got, err := c.Allow(ctx, id, 2, "")
		require.NoError(t, err, id)
		assert.Equal(t, api.AllowResponse{Allowed: true, Remaining: 3, Limit: 5, ResetAfterMs: 8000, Tier: "free", StampUnixNano: clk.now(), RefillPerSecond: "0.25"}, got, id)
		view, err := c.GetClient(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, id, view.Client)
		assert.Equal(t, "free", view.AssignedTier, id)
		assert.Equal(t, "3", view.RemainingExact, id)
		require.NoError(t, c.RemoveClientTier(ctx, id), id)
		view, err = c.GetClient(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, "default", view.Tier, id)
	}

	// Peek, duplicates and batches.
	got, err := c.Allow(ctx, "p", 0, "")
	require.NoError(t, err)
	assert.Equal(t, int64(3), got.Remaining, "cost 0 is sent, not defaulted to 1")
	got, err = c.Allow(ctx, "p", 1, "req-1")
	require.NoError(t, err)
	got2, err := c.Allow(ctx, "p", 1, "req-1")
	require.NoError(t, err)
	assert.True(t, got2.Duplicate)
	assert.Equal(t, got.Remaining, got2.Remaining)

	results, err := c.AllowBatch(ctx, []api.AllowRequest{{Client: "q"}, {Client: "q", Cost: new(int64(3))}, {Client: "q", Cost: new(int64(0))}})
	require.NoError(t, err)
	require.Len(t, results, 3)
	assert.Equal(t, []int64{2, 2, 2}, []int64{results[0].Remaining, results[1].Remaining, results[2].Remaining})
	assert.Equal(t, []bool{true, false, true}, []bool{results[0].Allowed, results[1].Allowed, results[2].Allowed})

	cc, err = c.DeleteTier(ctx, "free")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), cc.Version)

	st, err := c.Cluster(ctx)
	require.NoError(t, err)
	assert.Equal(t, "n1", st.NodeID)
	require.NoError(t, c.Ready(ctx))
}

func TestClientErrors(t *testing.T) {
	ctx := t.Context()
	svc, _ := newFSMService(t)
	c, _ := newTestClient(t, svc)

	tests := []struct {
		name   string
		call   func() error
		status int
		code   api.Code
	}{
		{"missing tier", func() error { _, err := c.DeleteTier(ctx, "gone"); return err }, 404, api.CodeTierNotFound},
		{"invalid default", func() error {
			_, err := c.PutDefault(ctx, bucket.Policy{Capacity: 0, Rate: 1}, bucket.Keep)
			return err
		}, 400, api.CodeInvalidPolicy},
		{"invalid tier name", func() error { _, err := c.PutTier(ctx, "Gold", bucket.Policy{Capacity: 1}, bucket.Keep); return err }, 400, api.CodeInvalidTierName},
		{"empty client", func() error { _, err := c.Allow(ctx, "", 1, ""); return err }, 400, api.CodeInvalidClient},
		{"negative cost", func() error { _, err := c.Allow(ctx, "a", -1, ""); return err }, 400, api.CodeInvalidCost},
		{"empty batch", func() error { _, err := c.AllowBatch(ctx, nil); return err }, 400, api.CodeEmptyBatch},
		{"empty tier", func() error { return c.SetClientTier(ctx, "a", "") }, 400, api.CodeInvalidTierName},
	}
	for _, tt := range tests {
		err := tt.call()
		var ae *client.Error
		require.ErrorAs(t, err, &ae, tt.name)
		assert.Equal(t, tt.status, ae.Status, tt.name)
		assert.Equal(t, tt.code, ae.Code, tt.name)
		assert.NotEmpty(t, ae.Message, tt.name)
		assert.Contains(t, ae.Error(), tt.code, tt.name)
	}

	svc.ready = func(context.Context) error { return fmt.Errorf("wrapped: %w", cluster.ErrUnavailable) }
	err := c.Ready(ctx)
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusServiceUnavailable, ae.Status)
	assert.Equal(t, api.CodeNotReady, ae.Code)
	assert.Equal(t, time.Second, ae.RetryAfter)
}

func TestClientSendsDeadline(t *testing.T) {
	got := make(chan time.Duration, 1)
	svc := &fakeService{allow: func(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
		dl, _ := ctx.Deadline()
		got <- time.Until(dl)
		return nil, fmt.Errorf("x: %w", cluster.ErrUnavailable)
	}}
	c, _ := newTestClient(t, svc)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Allow(ctx, "a", 1, "")
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, api.CodeUnavailable, ae.Code)
	assert.Equal(t, time.Second, ae.RetryAfter)
	d := <-got
	assert.True(t, d > 0 && d <= 300*time.Millisecond, "server deadline %v, want within the caller's 300ms", d)
}

func TestClientNonJSONError(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway from a proxy", http.StatusBadGateway)
	}))
	defer proxy.Close()
	c := client.NewNode(strings.TrimPrefix(proxy.URL, "http://"), nil) // a bare host:port
	_, err := c.Tiers(t.Context())
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadGateway, ae.Status)
	assert.Equal(t, "bad gateway from a proxy", ae.Message)
	assert.Empty(t, ae.Code, "a proxy's page has no quorate code")
	assert.Equal(t, api.Unknown, ae.Kind(), "a 502 from a proxy may have passed the request on")
	assert.False(t, errors.Is(err, context.Canceled))
}
