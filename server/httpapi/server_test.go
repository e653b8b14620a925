package httpapi

import (
	"context"
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
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/fsm"
)

// allowStep is one POST /v1/allow in a step table. before, when set, runs
// first (a policy change); advance moves the leader's clock first.
type allowStep struct {
	advance   time.Duration
	before    func(t *testing.T)
	client    string
	cost      int64
	allowed   bool
	remaining int64
	limit     int64
	tier      string
	// Headers; "" means absent.
	retryAfter string
	reset      string
}

func runAllowSteps(t *testing.T, ts *testServer, clk *fakeClock, steps []allowStep) {
	t.Helper()
	for i, st := range steps {
		clk.advance(st.advance)
		if st.before != nil {
			st.before(t)
		}
		a := ts.send(t, "POST", "/v1/allow", fmt.Sprintf(`{"client":%q,"cost":%d}`, st.client, st.cost))
		require.Equal(t, http.StatusOK, a.status, "step %d: %s", i, a.body)
		var got api.AllowResponse
		decodeJSON(t, a.body, &got)
		desc := fmt.Sprintf("step %d: allow(%s, cost %d) at t0+%v", i, st.client, st.cost, time.Duration(clk.now()-t0))
		assert.Equal(t, st.allowed, got.Allowed, "%s: allowed = %v, want %v", desc, got.Allowed, st.allowed)
		assert.Equal(t, st.remaining, got.Remaining, "%s: remaining", desc)
		assert.Equal(t, st.limit, got.Limit, "%s: limit", desc)
		assert.Equal(t, st.tier, got.Tier, "%s: tier", desc)
		assert.Equal(t, clk.now(), got.StampUnixNano, "%s: stamp", desc)
		assert.Equal(t, fmt.Sprint(st.limit), a.header.Get("RateLimit-Limit"), "%s: RateLimit-Limit", desc)
		assert.Equal(t, fmt.Sprint(st.remaining), a.header.Get("RateLimit-Remaining"), "%s: RateLimit-Remaining", desc)
		assert.Equal(t, st.reset, a.header.Get("RateLimit-Reset"), "%s: RateLimit-Reset", desc)
		assert.Equal(t, st.retryAfter, a.header.Get("Retry-After"), "%s: Retry-After", desc)
		assert.Equal(t, "application/json", a.header.Get("Content-Type"), desc)
	}
}

// TestWorkedExampleOverHTTP is README.md's worked example ("Try it")
// through the HTTP API and a real FSM.
func TestWorkedExampleOverHTTP(t *testing.T) {
	svc, clk := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	putTier := func(body string) func(t *testing.T) {
		return func(t *testing.T) {
			a := ts.send(t, "PUT", "/v1/tiers/free", body)
			require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		}
	}
	putTier(`{"capacity": 5, "refill_per_second": 1}`)(t)
	a := ts.send(t, "PUT", "/v1/clients/alice/tier", `{"tier":"free"}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)

	runAllowSteps(t, ts, clk, []allowStep{
		// t=0: five admitted, the sixth denied with Retry-After.
		{client: "alice", cost: 1, allowed: true, remaining: 4, limit: 5, tier: "free", reset: "1"},
		{client: "alice", cost: 1, allowed: true, remaining: 3, limit: 5, tier: "free", reset: "2"},
		{client: "alice", cost: 1, allowed: true, remaining: 2, limit: 5, tier: "free", reset: "3"},
		{client: "alice", cost: 1, allowed: true, remaining: 1, limit: 5, tier: "free", reset: "4"},
		{client: "alice", cost: 1, allowed: true, remaining: 0, limit: 5, tier: "free", reset: "5"},
		{client: "alice", cost: 1, allowed: false, remaining: 0, limit: 5, tier: "free", reset: "5", retryAfter: "1"},
		// t=2s: two admitted, the third denied.
		{advance: 2 * time.Second, client: "alice", cost: 1, allowed: true, remaining: 1, limit: 5, tier: "free", reset: "4"},
		{client: "alice", cost: 1, allowed: true, remaining: 0, limit: 5, tier: "free", reset: "5"},
		{client: "alice", cost: 1, allowed: false, remaining: 0, limit: 5, tier: "free", reset: "5", retryAfter: "1"},
		// Raise free to 10: the balance continues from 0, not 10.
		{before: putTier(`{"capacity": 10, "refill_per_second": 1}`), client: "alice", cost: 0, allowed: true, remaining: 0, limit: 10, tier: "free", reset: "10"},
		{advance: 3 * time.Second, client: "alice", cost: 0, allowed: true, remaining: 3, limit: 10, tier: "free", reset: "7"},
		// Lower free to 2: clamped to 2 at once.
		{before: putTier(`{"capacity": 2, "refill_per_second": 1}`), client: "alice", cost: 0, allowed: true, remaining: 2, limit: 2, tier: "free", reset: "0"},
		{client: "alice", cost: 1, allowed: true, remaining: 1, limit: 2, tier: "free", reset: "1"},
		{client: "alice", cost: 1, allowed: true, remaining: 0, limit: 2, tier: "free", reset: "2"},
		{client: "alice", cost: 1, allowed: false, remaining: 0, limit: 2, tier: "free", reset: "2", retryAfter: "1"},
		// A client with no tier uses the default (built-in: 10, 1/s).
		{client: "bob", cost: 1, allowed: true, remaining: 9, limit: 10, tier: "default", reset: "1"},
	})
}

func TestAllowNeverAndRounding(t *testing.T) {
	svc, clk := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	for _, tier := range []struct{ name, body string }{
		{"frozen", `{"capacity": 1, "refill_per_second": 0}`},
		{"third", `{"capacity": 1, "refill_per_second": 3}`}, // a token every 333.33 ms
	} {
		require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/tiers/"+tier.name, tier.body).status)
	}
	require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/clients/ice/tier", `{"tier":"frozen"}`).status)
	require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/clients/tri/tier", `{"tier":"third"}`).status)

	runAllowSteps(t, ts, clk, []allowStep{
		// A bucket that never refills: -1 in the body, no Retry-After, no RateLimit-Reset.
		{client: "ice", cost: 1, allowed: true, remaining: 0, limit: 1, tier: "frozen"},
		{client: "ice", cost: 1, allowed: false, remaining: 0, limit: 1, tier: "frozen"},
		// Seconds round up: 333.33 ms is "1".
		{client: "tri", cost: 1, allowed: true, remaining: 0, limit: 1, tier: "third", reset: "1"},
		{client: "tri", cost: 1, allowed: false, remaining: 0, limit: 1, tier: "third", reset: "1", retryAfter: "1"},
		// Cost above capacity never succeeds, but the bucket still refills.
		{advance: time.Second, client: "tri", cost: 2, allowed: false, remaining: 1, limit: 1, tier: "third", reset: "0"},
	})

	clk.advance(100 * time.Millisecond)
	a := ts.send(t, "POST", "/v1/allow", `{"client":"ice"}`)
	var got api.AllowResponse
	decodeJSON(t, a.body, &got)
	assert.Equal(t, int64(-1), got.RetryAfterMs, "never refills")
	assert.Equal(t, int64(-1), got.ResetAfterMs, "never refills")

	a = ts.send(t, "POST", "/v1/allow", `{"client":"tri","cost":1}`)
	decodeJSON(t, a.body, &got)
	require.True(t, got.Allowed)
	a = ts.send(t, "POST", "/v1/allow", `{"client":"tri","cost":1}`)
	decodeJSON(t, a.body, &got)
	require.False(t, got.Allowed)
	assert.Equal(t, int64(334), got.RetryAfterMs, "333.33 ms rounds up")
	assert.Equal(t, int64(334), got.ResetAfterMs)

	a = ts.send(t, "POST", "/v1/allow", `{"client":"tri","cost":2}`)
	decodeJSON(t, a.body, &got)
	assert.Equal(t, int64(-1), got.RetryAfterMs, "cost above capacity")
	assert.Equal(t, "", a.header.Get("Retry-After"))
}

func TestDenyStatus429(t *testing.T) {
	svc, _ := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	a := ts.send(t, "POST", "/v1/allow?status=429", `{"client":"c","cost":10}`)
	require.Equal(t, http.StatusOK, a.status, "an admission is 200 even with status=429")
	a = ts.send(t, "POST", "/v1/allow?status=429", `{"client":"c"}`)
	require.Equal(t, http.StatusTooManyRequests, a.status)
	var got api.AllowResponse
	decodeJSON(t, a.body, &got)
	assert.False(t, got.Allowed)
	assert.Equal(t, "1", a.header.Get("Retry-After"))

	a = ts.send(t, "POST", "/v1/allow", `{"client":"c"}`)
	assert.Equal(t, http.StatusOK, a.status, "a denial is 200 by default")
}

func TestDefaultsAndDuplicates(t *testing.T) {
	svc, _ := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	var got api.AllowResponse

	a := ts.send(t, "POST", "/v1/allow", `{"client":"d"}`)
	decodeJSON(t, a.body, &got)
	assert.Equal(t, int64(9), got.Remaining, "a missing cost is 1")
	a = ts.send(t, "POST", "/v1/allow", `{"client":"d","cost":null,"request_id":null}`)
	decodeJSON(t, a.body, &got)
	assert.Equal(t, int64(8), got.Remaining, "a null cost is 1")
	a = ts.send(t, "POST", "/v1/allow", `{"client":"d","cost":0}`)
	decodeJSON(t, a.body, &got)
	assert.Equal(t, int64(8), got.Remaining, "cost 0 peeks")
	a = ts.send(t, "POST", "/v1/allow", `{"client":"d","cost":2.0e0}`)
	decodeJSON(t, a.body, &got)
	assert.Equal(t, int64(6), got.Remaining, "2.0e0 is a whole number")

	a = ts.send(t, "POST", "/v1/allow", `{"client":"d","request_id":"r1"}`)
	decodeJSON(t, a.body, &got)
	assert.Equal(t, int64(5), got.Remaining)
	assert.NotContains(t, string(a.body), "duplicate", "duplicate is omitted when false")
	a = ts.send(t, "POST", "/v1/allow", `{"client":"d","request_id":"r1"}`)
	decodeJSON(t, a.body, &got)
	assert.True(t, got.Duplicate)
	assert.Equal(t, int64(5), got.Remaining, "a duplicate takes nothing")
}

func TestAllowLimitsAccepted(t *testing.T) {
	svc, _ := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	for _, body := range []string{
		fmt.Sprintf(`{"client":%q}`, strings.Repeat("x", fsm.MaxClientLen)),
		fmt.Sprintf(`{"client":"é 🙂","request_id":%q}`, strings.Repeat("r", fsm.MaxRequestIDLen)),
		fmt.Sprintf(`{"client":"big","cost":%d}`, int64(bucket.MaxCost)),
		` {"client":"ws"}` + "\n\t ",
	} {
		a := ts.send(t, "POST", "/v1/allow", body)
		assert.Equal(t, http.StatusOK, a.status, "%s: %s", body, a.body)
	}
	for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "Application/JSON; charset=UTF-8"} {
		a := ts.send(t, "POST", "/v1/allow", `{"client":"ct"}`, "Content-Type", ct)
		assert.Equal(t, http.StatusOK, a.status, "Content-Type %q: %s", ct, a.body)
	}
}

func TestBatchKeepsOrder(t *testing.T) {
	svc, _ := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/tiers/tiny", `{"capacity":2,"refill_per_second":1}`).status)
	require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/clients/t/tier", `{"tier":"tiny"}`).status)

	a := ts.send(t, "POST", "/v1/allow/batch", `{"requests":[
		{"client":"t"}, {"client":"u","cost":3}, {"client":"t"}, {"client":"t"},
		{"client":"u","cost":0}, {"client":"t","request_id":"x"}, {"client":"t","request_id":"x"}]}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Empty(t, a.header.Get("RateLimit-Limit"), "a batch carries no RateLimit headers")
	var got api.BatchResponse
	decodeJSON(t, a.body, &got)
	type res struct {
		allowed   bool
		remaining int64
		tier      string
		dup       bool
	}
	want := []res{
		{true, 1, "tiny", false}, {true, 7, "default", false}, {true, 0, "tiny", false}, {false, 0, "tiny", false},
		{true, 7, "default", false}, {false, 0, "tiny", false}, {false, 0, "tiny", true},
	}
	require.Len(t, got.Results, len(want))
	for i, w := range want {
		g := got.Results[i]
		assert.Equal(t, w, res{g.Allowed, g.Remaining, g.Tier, g.Duplicate}, "result %d", i)
	}
}

func TestGetClient(t *testing.T) {
	svc, clk := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/tiers/free", `{"capacity":5,"refill_per_second":1}`).status)
	require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/clients/alice/tier", `{"tier":"free"}`).status)
	require.Equal(t, http.StatusOK, ts.send(t, "POST", "/v1/allow", `{"client":"alice","cost":5}`).status)
	clk.advance(500 * time.Millisecond)
	calls := svc.calls.Load()

	a := ts.send(t, "GET", "/v1/clients/alice", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var got api.ClientResponse
	decodeJSON(t, a.body, &got)
	assert.Equal(t, api.ClientResponse{
		Client: "alice", Tier: "free", AssignedTier: "free",
		Policy:    tokenBucketJSON(5, "1"),
		Remaining: 0, RemainingExact: "0.5", RetryAfterMs: 500, ResetAfterMs: 4500,
		Known: true, StampUnixNano: t0 + int64(500*time.Millisecond),
	}, got)
	assert.Equal(t, calls+1, svc.calls.Load())

	a = ts.send(t, "GET", "/v1/clients/alice", "")
	decodeJSON(t, a.body, &got)
	assert.Equal(t, "0.5", got.RemainingExact, "reading consumes nothing")

	// Assigned to a tier that does not exist: the default decides.
	require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/clients/a%2Fb/tier", `{"tier":"gold"}`).status)
	a = ts.send(t, "GET", "/v1/clients/a%2Fb", "")
	decodeJSON(t, a.body, &got)
	assert.Equal(t, api.ClientResponse{
		Client: "a/b", Tier: "default", AssignedTier: "gold",
		Policy:    tokenBucketJSON(10, "1"),
		Remaining: 10, RemainingExact: "10", Known: false, StampUnixNano: t0 + int64(500*time.Millisecond),
	}, got)

	a = ts.send(t, "DELETE", "/v1/clients/alice/tier", "")
	require.Equal(t, http.StatusOK, a.status)
	var ct api.ClientTierResponse
	decodeJSON(t, a.body, &ct)
	assert.Equal(t, api.ClientTierResponse{Client: "alice"}, ct)
	a = ts.send(t, "GET", "/v1/clients/alice", "")
	decodeJSON(t, a.body, &got)
	assert.Equal(t, "", got.AssignedTier)
	assert.Equal(t, "default", got.Tier)
}

func TestTiersAndDefault(t *testing.T) {
	svc, _ := newFSMService(t)
	ts := newTestServer(t, svc, Options{})

	a := ts.send(t, "PUT", "/v1/tiers/pro", `{"capacity":100,"refill_per_second":2.5}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	var cc api.ConfigChange
	decodeJSON(t, a.body, &cc)
	assert.Equal(t, api.ConfigChange{Version: 1, Applied: []string{"0"}}, cc)
	assert.NotContains(t, string(a.body), "lagging")

	require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/tiers/free", `{"capacity":5e0,"refill_per_second":0.000000001}`).status)
	require.Equal(t, http.StatusOK, ts.send(t, "PUT", "/v1/default", `{"capacity":20,"refill_per_second":0.5}`).status)

	a = ts.send(t, "GET", "/v1/tiers", "")
	require.Equal(t, http.StatusOK, a.status)
	tb := `"algorithm":"token_bucket","mode":"enforce","when_unavailable":"deny"`
	assert.JSONEq(t, `{"version":3,"default":{"capacity":20,"refill_per_second":0.5,`+tb+`},
		"tiers":{"free":{"capacity":5,"refill_per_second":0.000000001,`+tb+`},"pro":{"capacity":100,"refill_per_second":2.5,`+tb+`}}}`, string(a.body))

	a = ts.send(t, "DELETE", "/v1/tiers/pro", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	decodeJSON(t, a.body, &cc)
	assert.Equal(t, uint64(4), cc.Version)

	calls := svc.calls.Load()
	a = ts.send(t, "DELETE", "/v1/tiers/pro", "")
	require.Equal(t, http.StatusNotFound, a.status, "%s", a.body)
	assert.Equal(t, api.CodeTierNotFound, errorOf(t, a).Code)
	assert.Equal(t, calls+1, svc.calls.Load(), "a missing tier is the service's answer")
}

func TestConfigChangeLagging(t *testing.T) {
	svc := &fakeService{changeConfig: func(ctx context.Context, op fsm.ConfigOp) (api.ConfigChange, error) {
		return api.ConfigChange{Version: 7, Applied: []string{"0", "2"}, Lagging: []string{"1"}}, nil
	}}
	ts := newTestServer(t, svc, Options{})
	for _, req := range []struct{ method, path, body string }{
		{"PUT", "/v1/tiers/free", `{"capacity":5,"refill_per_second":1}`},
		{"PUT", "/v1/default", `{"capacity":5,"refill_per_second":1}`},
		{"DELETE", "/v1/tiers/free", ""},
	} {
		a := ts.send(t, req.method, req.path, req.body)
		require.Equal(t, http.StatusAccepted, a.status, "%s %s: %s", req.method, req.path, a.body)
		assert.JSONEq(t, `{"version":7,"applied":["0","2"],"lagging":["1"]}`, string(a.body))
	}
}

func TestServiceErrorMapping(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		status     int
		code       api.Code
		retryAfter string
	}{
		{"unavailable", fmt.Errorf("group 3: %w", cluster.ErrUnavailable), 503, api.CodeUnavailable, "1"},
		{"shutting down", fmt.Errorf("wrapped: %w", cluster.ErrShuttingDown), 503, api.CodeShuttingDown, "1"},
		{"outcome unknown", fmt.Errorf("group 2: %w", cluster.ErrOutcomeUnknown), 503, api.CodeOutcomeUnknown, "1"},
		// The fault suite's membership mix found a forwarded request that
		// was decided answered shutting_down: its answer was lost as the
		// node stopped, and the error, unknown wrapping shutting down, was
		// matched as the latter. Nothing else may hide an unknown outcome.
		{"unknown, then shutting down", fmt.Errorf("%w: %w", cluster.ErrOutcomeUnknown, cluster.ErrShuttingDown), 503, api.CodeOutcomeUnknown, "1"},
		{"unknown, then overloaded", fmt.Errorf("%w: %w", cluster.ErrOutcomeUnknown, cluster.ErrOverloaded), 503, api.CodeOutcomeUnknown, "1"},
		{"unknown, then disk full", fmt.Errorf("%w: %w", cluster.ErrOutcomeUnknown, cluster.ErrDiskFull), 503, api.CodeOutcomeUnknown, "1"},
		{"overloaded", fmt.Errorf("group 2: %w", cluster.ErrOverloaded), 503, api.CodeOverloaded, "1"},
		{"too many clients", fmt.Errorf("x: %w", cluster.ErrTooManyClients), 503, api.CodeTooManyClients, "1"},
		{"disk full", fmt.Errorf("x: %w", cluster.ErrDiskFull), 503, api.CodeDiskFull, "5"},
		{"deadline", fmt.Errorf("apply: %w", context.DeadlineExceeded), 503, api.CodeTimeout, "1"},
		{"invalid policy", fmt.Errorf("x: %w", bucket.ErrInvalidPolicy), 400, api.CodeInvalidPolicy, ""},
		{"invalid tier name", fmt.Errorf("x: %w", bucket.ErrInvalidTierName), 400, api.CodeInvalidTierName, ""},
		{"no such tier", fmt.Errorf("x: %w", fsm.ErrNoSuchTier), 404, api.CodeTierNotFound, ""},
		{"too many tiers", fmt.Errorf("x: %w", bucket.ErrTooManyTiers), 409, api.CodeTooManyTiers, ""},
		{"anything else", fmt.Errorf("disk on fire at /var/secret"), 500, api.CodeInternal, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &fakeService{
				allow: func(context.Context, []fsm.AllowRequest) ([]fsm.Decision, error) { return nil, tt.err },
				changeConfig: func(context.Context, fsm.ConfigOp) (api.ConfigChange, error) {
					return api.ConfigChange{}, tt.err
				},
				config: func(context.Context) (bucket.Config, error) { return bucket.Config{}, tt.err },
				client: func(context.Context, string) (fsm.ClientView, error) { return fsm.ClientView{}, tt.err },
			}
			ts := newTestServer(t, svc, Options{})
			for _, req := range []struct{ method, path, body string }{
				{"POST", "/v1/allow", `{"client":"a"}`},
				{"POST", "/v1/allow/batch", `{"requests":[{"client":"a"}]}`},
				{"PUT", "/v1/tiers/free", `{"capacity":5,"refill_per_second":1}`},
				{"GET", "/v1/tiers", ""},
				{"GET", "/v1/clients/a", ""},
			} {
				a := ts.send(t, req.method, req.path, req.body)
				assert.Equal(t, tt.status, a.status, "%s %s: %s", req.method, req.path, a.body)
				e := errorOf(t, a)
				assert.Equal(t, tt.code, e.Code, "%s %s", req.method, req.path)
				assert.Equal(t, tt.retryAfter, a.header.Get("Retry-After"), "%s %s", req.method, req.path)
				assert.NotContains(t, e.Message, "secret", "internal details must not leak")
			}
		})
	}
}

func TestDeadlines(t *testing.T) {
	deadlines := make(chan time.Duration, 1)
	svc := &fakeService{allow: func(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return nil, fmt.Errorf("no deadline")
		}
		deadlines <- time.Until(dl)
		<-ctx.Done() // the service gives up when the caller's deadline passes
		return nil, fmt.Errorf("waiting for commit: %w", ctx.Err())
	}}
	ts := newTestServer(t, svc, Options{DefaultTimeout: 50 * time.Millisecond, MaxTimeout: 200 * time.Millisecond})
	tests := []struct {
		header string
		min    time.Duration
		max    time.Duration
	}{
		{"", 0, 50 * time.Millisecond},
		{"1", 0, time.Millisecond},
		{"150", 50 * time.Millisecond, 150 * time.Millisecond},
		{"999999999999", 150 * time.Millisecond, 200 * time.Millisecond}, // capped at MaxTimeout
	}
	for _, tt := range tests {
		a := ts.send(t, "POST", "/v1/allow", `{"client":"a"}`, api.HeaderTimeout, tt.header)
		require.Equal(t, http.StatusServiceUnavailable, a.status, "%s", a.body)
		assert.Equal(t, api.CodeTimeout, errorOf(t, a).Code)
		assert.Equal(t, "1", a.header.Get("Retry-After"))
		d := <-deadlines
		assert.True(t, d <= tt.max && (tt.min == 0 || d > tt.min), "%s %q: deadline in %v, want in (%v, %v]", api.HeaderTimeout, tt.header, d, tt.min, tt.max)
	}
}

func TestRouting(t *testing.T) {
	svc, _ := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	tests := []struct {
		method, path string
		status       int
		code         api.Code
		allow        string
	}{
		{"GET", "/v1/allow", 405, api.CodeMethodNotAllowed, "POST"},
		{"PUT", "/v1/allow/batch", 405, api.CodeMethodNotAllowed, "POST"},
		{"POST", "/v1/tiers", 405, api.CodeMethodNotAllowed, "GET, HEAD"},
		{"GET", "/v1/tiers/free", 405, api.CodeMethodNotAllowed, "PUT, DELETE"},
		{"POST", "/v1/clients/a/tier", 405, api.CodeMethodNotAllowed, "PUT, DELETE"},
		{"DELETE", "/v1/clients/a", 405, api.CodeMethodNotAllowed, "GET, HEAD"},
		{"GET", "/v2/allow", 404, api.CodeNotFound, ""},
		{"GET", "/v1/tiers/", 404, api.CodeNotFound, ""},
		{"GET", "/", 404, api.CodeNotFound, ""},
	}
	for _, tt := range tests {
		a := ts.send(t, tt.method, tt.path, "")
		assert.Equal(t, tt.status, a.status, "%s %s", tt.method, tt.path)
		assert.Equal(t, tt.code, errorOf(t, a).Code, "%s %s", tt.method, tt.path)
		assert.Equal(t, tt.allow, a.header.Get("Allow"), "%s %s", tt.method, tt.path)
	}
	assert.Zero(t, svc.calls.Load())
}

func TestHealthReadyCluster(t *testing.T) {
	svc, _ := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	a := ts.send(t, "GET", "/healthz", "")
	assert.Equal(t, http.StatusOK, a.status)
	assert.JSONEq(t, `{"status":"ok"}`, string(a.body))
	a = ts.send(t, "GET", "/readyz", "")
	assert.Equal(t, http.StatusOK, a.status)
	assert.JSONEq(t, `{"status":"ready"}`, string(a.body))
	a = ts.send(t, "GET", "/v1/cluster", "")
	require.Equal(t, http.StatusOK, a.status)
	var st api.ClusterStatus
	decodeJSON(t, a.body, &st)
	assert.Equal(t, "n1", st.NodeID)
	require.Len(t, st.Groups, 1)
	assert.Equal(t, "n1", st.Groups[0].Leader)

	svc.ready = func(context.Context) error { return fmt.Errorf("group 3 has no leader") }
	a = ts.send(t, "GET", "/readyz", "")
	assert.Equal(t, http.StatusServiceUnavailable, a.status)
	assert.Equal(t, api.ErrorDetail{Code: api.CodeNotReady, Message: "group 3 has no leader"}, errorOf(t, a))
	svc.ready = func(context.Context) error { return cluster.ErrShuttingDown }
	a = ts.send(t, "GET", "/readyz", "")
	assert.Equal(t, http.StatusServiceUnavailable, a.status)
	assert.Equal(t, api.CodeShuttingDown, errorOf(t, a).Code)
}

func TestServiceAnswersWrongCount(t *testing.T) {
	svc := &fakeService{allow: func(context.Context, []fsm.AllowRequest) ([]fsm.Decision, error) {
		return []fsm.Decision{{}}, nil
	}}
	ts := newTestServer(t, svc, Options{})
	a := ts.send(t, "POST", "/v1/allow/batch", `{"requests":[{"client":"a"},{"client":"b"}]}`)
	assert.Equal(t, http.StatusInternalServerError, a.status)
	assert.Equal(t, api.CodeInternal, errorOf(t, a).Code)
}

func TestPanicIsInternal(t *testing.T) {
	svc := &fakeService{allow: func(context.Context, []fsm.AllowRequest) ([]fsm.Decision, error) { panic("bug") }}
	ts := newTestServer(t, svc, Options{})
	a := ts.send(t, "POST", "/v1/allow", `{"client":"a"}`)
	assert.Equal(t, http.StatusInternalServerError, a.status)
	assert.Equal(t, api.CodeInternal, errorOf(t, a).Code)
}

// A request with several faults is refused for the first one checked: the
// path, then the deadline header, then the body. (The guard's checks come
// before all of these: TestGuardComesFirst. The charset here passes them.)
func TestCheckOrder(t *testing.T) {
	svc, _ := newFSMService(t)
	ts := newTestServer(t, svc, Options{})
	bad := []string{api.HeaderTimeout, "soon", "Content-Type", "application/json; charset=latin1"}
	for _, tt := range []struct {
		method, path, body string
		status             int
		code               api.Code
	}{
		{"GET", "/v1/clients/a%00b", "", 400, api.CodeInvalidClient},
		{"PUT", "/v1/clients/a%00b/tier", `{"tier":5}`, 400, api.CodeInvalidClient},
		{"DELETE", "/v1/clients/a%00b/tier", "", 400, api.CodeInvalidClient},
		{"PUT", "/v1/tiers/Free", `{}`, 400, api.CodeInvalidTierName},
		{"DELETE", "/v1/tiers/Free", "", 400, api.CodeInvalidTierName},
		{"PUT", "/v1/default", `{}`, 400, api.CodeInvalidTimeout},
		{"GET", "/v1/tiers", "", 400, api.CodeInvalidTimeout},
		{"GET", "/v1/cluster", "", 400, api.CodeInvalidTimeout},
		{"GET", "/readyz", "", 400, api.CodeInvalidTimeout},
		{"POST", "/v1/allow?status=1", `{}`, 400, api.CodeInvalidQuery},
		{"POST", "/v1/allow", `{}`, 400, api.CodeInvalidTimeout},
		{"POST", "/v1/allow/batch", `{}`, 400, api.CodeInvalidTimeout},
	} {
		a := ts.send(t, tt.method, tt.path, tt.body, bad...)
		assert.Equal(t, tt.status, a.status, "%s %s: %s", tt.method, tt.path, a.body)
		assert.Equal(t, tt.code, errorOf(t, a).Code, "%s %s", tt.method, tt.path)
	}
	a := ts.send(t, "GET", "/healthz", "", bad...)
	assert.Equal(t, http.StatusOK, a.status, "liveness reads no deadline")
	assert.Zero(t, svc.calls.Load())
}

func TestHeaderValueIsGet(t *testing.T) {
	h := http.Header{}
	h.Set(api.HeaderTimeout, "5")
	h.Add("Content-Type", "a")
	h.Add("Content-Type", "b")
	for _, key := range []string{api.HeaderTimeout, "Content-Type", "Retry-After"} {
		require.Equal(t, key, http.CanonicalHeaderKey(key), "headerValue needs canonical keys")
		assert.Equal(t, h.Get(key), headerValue(h, key), key)
	}
	assert.Empty(t, headerValue(nil, api.HeaderTimeout))
}

// Every error of the cluster is answered with its own code and a message
// that says what the caller may do.
func TestEveryClusterErrorHasItsAnswer(t *testing.T) {
	s := New(&fakeService{}, Options{})
	r := httptest.NewRequest(http.MethodPost, "/v1/allow", nil)
	for _, e := range errs.All {
		ae := s.mapError(r, fmt.Errorf("group 2: %w", e))
		assert.Equal(t, e.Code(), ae.code, "%v", e)
		assert.NotEmpty(t, ae.msg, "%v", e)
		m, _ := api.Lookup(e.Code())
		assert.Equal(t, m.Status, ae.status, "%v", e)
	}
}
