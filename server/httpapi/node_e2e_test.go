package httpapi_test

// End-to-end tests: the HTTP API in front of a real cluster.Node (real raft,
// real bolt files in t.TempDir(), real HTTP on loopback), with an injected
// clock that moves only when a test advances it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/clustertest"
	"github.com/quorate/quorate/server/httpapi"
)

// e2eT0 is where every clock.Manual starts.
var e2eT0 = clock.ManualStart

func newManualClock() *clock.Manual { return clock.NewManual() }

// liveNode is a real single-node cluster served by the HTTP API on loopback.
type liveNode struct {
	node *cluster.Node
	srv  *httptest.Server
	api  *client.Node
}

// startLiveNode starts node n1 on dir (new or existing) with clock, serves
// it over HTTP, and waits until every group has a leader and has applied a
// configuration. Both are closed when the test ends.
func startLiveNode(t *testing.T, dir string, clock clock.Clock) *liveNode {
	t.Helper()
	reg := prometheus.NewRegistry()
	node := clustertest.StartNode(t, cluster.Options{DataDir: dir, Clock: clock, Registerer: reg})
	srv := httptest.NewServer(httpapi.New(node, httpapi.Options{Registerer: reg, Gatherer: reg}))
	t.Cleanup(srv.Close) // runs before node.Close
	return &liveNode{node: node, srv: srv, api: client.NewNode(srv.URL, srv.Client())}
}

// close stops the HTTP server and then the node, as a restart would.
func (ln *liveNode) close(t *testing.T) {
	t.Helper()
	ln.srv.Close()
	require.NoError(t, ln.node.Close())
}

// reply is an answer with its body read.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends one raw request: body as is (nil for none), Content-Type ctype
// unless ctype is "".
func (ln *liveNode) do(t *testing.T, method, path, ctype string, body []byte) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, ln.srv.URL+path, rd)
	require.NoError(t, err)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := ln.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// send sends body ("" for none) as application/json.
func (ln *liveNode) send(t *testing.T, method, path, body string) reply {
	t.Helper()
	if body == "" {
		return ln.do(t, method, path, "", nil)
	}
	return ln.do(t, method, path, "application/json", []byte(body))
}

// mustOK sends body and requires a 200.
func (ln *liveNode) mustOK(t *testing.T, method, path, body string) reply {
	t.Helper()
	r := ln.send(t, method, path, body)
	require.Equal(t, http.StatusOK, r.status, "%s %s %s: %s", method, path, body, r.body)
	return r
}

// putPolicy sets a tier (or the default, for path "/v1/default") and
// requires that every data group applied it.
func (ln *liveNode) putPolicy(t *testing.T, path, body string) api.ConfigChange {
	t.Helper()
	cc := decodeStrict[api.ConfigChange](t, ln.mustOK(t, "PUT", path, body).body)
	require.Empty(t, cc.Lagging)
	require.ElementsMatch(t, []string{"0", "1", "2", "3"}, cc.Applied)
	return cc
}

func (ln *liveNode) getClient(t *testing.T, client string) api.ClientResponse {
	t.Helper()
	return decodeStrict[api.ClientResponse](t, ln.mustOK(t, "GET", "/v1/clients/"+client, "").body)
}

func (ln *liveNode) getTiers(t *testing.T) api.TiersResponse {
	t.Helper()
	return decodeStrict[api.TiersResponse](t, ln.mustOK(t, "GET", "/v1/tiers", "").body)
}

func (ln *liveNode) allow(t *testing.T, body string) api.AllowResponse {
	t.Helper()
	return decodeStrict[api.AllowResponse](t, ln.mustOK(t, "POST", "/v1/allow", body).body)
}

// decodeStrict decodes b as one T, refusing unknown fields so that the
// exported types and the real answers cannot drift apart.
func decodeStrict[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), "body %s", b)
	return v
}

// TestNodeWorkedExample is README.md's worked example ("Try it") over HTTP
// against a real node, time moved only by the injected clock.
func TestNodeWorkedExample(t *testing.T) {
	t.Parallel()
	clock := newManualClock()
	ln := startLiveNode(t, t.TempDir(), clock)
	ln.putPolicy(t, "/v1/tiers/free", `{"capacity": 5, "refill_per_second": 1}`)
	ln.mustOK(t, "PUT", "/v1/clients/alice/tier", `{"tier":"free"}`)

	// A step is an allow of cost 1 (or, with get, a GET of the client),
	// after moving the clock and optionally changing tier free.
	type step struct {
		advance time.Duration
		putFree string // PUT /v1/tiers/free with this body first
		get     bool   // GET /v1/clients/{client} instead of an allow
		query   string // appended to /v1/allow
		client  string

		status       int // allow only; 0 means 200
		allowed      bool
		remaining    int64
		exact        string // remaining_exact, get only
		limit        int64
		tier         string
		retryAfterMs int64
		retryAfter   string // Retry-After header; "" means absent
		reset        string // RateLimit-Reset header
	}
	steps := []step{
		// t0: five admitted, the sixth denied, retry in one second.
		{client: "alice", allowed: true, remaining: 4, limit: 5, tier: "free", reset: "1"},
		{client: "alice", allowed: true, remaining: 3, limit: 5, tier: "free", reset: "2"},
		{client: "alice", allowed: true, remaining: 2, limit: 5, tier: "free", reset: "3"},
		{client: "alice", allowed: true, remaining: 1, limit: 5, tier: "free", reset: "4"},
		{client: "alice", allowed: true, remaining: 0, limit: 5, tier: "free", reset: "5"},
		{client: "alice", allowed: false, remaining: 0, limit: 5, tier: "free", reset: "5", retryAfter: "1", retryAfterMs: 1000},
		// ?status=429 turns a denial into 429, same body and headers.
		{query: "?status=429", client: "alice", status: 429, allowed: false, remaining: 0, limit: 5, tier: "free", reset: "5", retryAfter: "1", retryAfterMs: 1000},
		// t0+2s: two admitted (one with ?status=429: still 200), the third denied.
		{advance: 2 * time.Second, query: "?status=429", client: "alice", allowed: true, remaining: 1, limit: 5, tier: "free", reset: "4"},
		{client: "alice", allowed: true, remaining: 0, limit: 5, tier: "free", reset: "5"},
		{client: "alice", allowed: false, remaining: 0, limit: 5, tier: "free", reset: "5", retryAfter: "1", retryAfterMs: 1000},
		// Raise free to 10: no gift, the balance stays 0.
		{putFree: `{"capacity": 10, "refill_per_second": 1}`, get: true, client: "alice", remaining: 0, exact: "0", limit: 10, tier: "free", retryAfterMs: 1000},
		// t0+6s: 4 tokens under capacity 10; lower free to 2: clamped to 2.
		{advance: 4 * time.Second, get: true, client: "alice", remaining: 4, exact: "4", limit: 10, tier: "free"},
		{putFree: `{"capacity": 2, "refill_per_second": 1}`, get: true, client: "alice", remaining: 2, exact: "2", limit: 2, tier: "free"},
		{client: "alice", allowed: true, remaining: 1, limit: 2, tier: "free", reset: "1"},
		{client: "alice", allowed: true, remaining: 0, limit: 2, tier: "free", reset: "2"},
		{client: "alice", allowed: false, remaining: 0, limit: 2, tier: "free", reset: "2", retryAfter: "1", retryAfterMs: 1000},
		// A client with no tier uses the built-in default: 10, 1/s.
		{get: true, client: "bob", remaining: 10, exact: "10", limit: 10, tier: "default"},
		{client: "bob", allowed: true, remaining: 9, limit: 10, tier: "default", reset: "1"},
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		if st.putFree != "" {
			ln.putPolicy(t, "/v1/tiers/free", st.putFree)
		}
		at := clock.Now().Sub(e2eT0)
		if st.get {
			v := ln.getClient(t, st.client)
			desc := fmt.Sprintf("step %d: GET /v1/clients/%s at t0+%v", i, st.client, at)
			assert.Equal(t, st.remaining, v.Remaining, "%s: remaining", desc)
			assert.Equal(t, st.exact, v.RemainingExact, "%s: remaining_exact", desc)
			assert.Equal(t, st.limit, v.Policy.Capacity, "%s: capacity", desc)
			assert.Equal(t, st.tier, v.Tier, "%s: tier", desc)
			assert.Equal(t, st.retryAfterMs, v.RetryAfterMs, "%s: retry_after_ms", desc)
			assert.Equal(t, clock.Now().UnixNano(), v.StampUnixNano, "%s: stamp", desc)
			continue
		}
		want := st.status
		if want == 0 {
			want = http.StatusOK
		}
		r := ln.send(t, "POST", "/v1/allow"+st.query, fmt.Sprintf(`{"client":%q}`, st.client))
		desc := fmt.Sprintf("step %d: POST /v1/allow%s {client %s} at t0+%v", i, st.query, st.client, at)
		require.Equal(t, want, r.status, "%s: %s", desc, r.body)
		got := decodeStrict[api.AllowResponse](t, r.body)
		assert.Equal(t, st.allowed, got.Allowed, "%s: allowed = %v, want %v", desc, got.Allowed, st.allowed)
		assert.Equal(t, st.remaining, got.Remaining, "%s: remaining", desc)
		assert.Equal(t, st.limit, got.Limit, "%s: limit", desc)
		assert.Equal(t, st.tier, got.Tier, "%s: tier", desc)
		assert.Equal(t, st.retryAfterMs, got.RetryAfterMs, "%s: retry_after_ms", desc)
		assert.Equal(t, clock.Now().UnixNano(), got.StampUnixNano, "%s: stamp", desc)
		assert.Equal(t, fmt.Sprint(st.limit), r.header.Get("RateLimit-Limit"), "%s: RateLimit-Limit", desc)
		assert.Equal(t, fmt.Sprint(st.remaining), r.header.Get("RateLimit-Remaining"), "%s: RateLimit-Remaining", desc)
		assert.Equal(t, st.reset, r.header.Get("RateLimit-Reset"), "%s: RateLimit-Reset", desc)
		assert.Equal(t, st.retryAfter, r.header.Get("Retry-After"), "%s: Retry-After", desc)
	}
	tiers := ln.getTiers(t)
	assert.Equal(t, api.Policy{Algorithm: "token_bucket", Capacity: 10, RefillPerSecond: "1", Mode: "enforce", WhenUnavailable: "deny"}, tiers.Default)
}

// badRow is a request the API must refuse without changing anything.
type badRow struct {
	name         string
	method, path string
	ctype        string // Content-Type; "" means application/json when there is a body
	body         string
	status       int
	code         api.Code
	field        string // must appear in the message
}

// TestNodeBadInputChangesNothing sends every kind of bad input to a real
// node and checks the answer and that the whole observable state (the
// configuration and its version, and every client the rows touch) is byte
// for byte the same afterwards, with the clock standing still.
func TestNodeBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	clock := newManualClock()
	ln := startLiveNode(t, t.TempDir(), clock)

	// State worth protecting: two tiers, an assignment, partial balances, a
	// client assigned to a tier that does not exist, and an unknown client.
	ln.putPolicy(t, "/v1/tiers/free", `{"capacity": 5, "refill_per_second": 1}`)
	ln.putPolicy(t, "/v1/tiers/pro", `{"capacity": 100, "refill_per_second": 0.5}`)
	ln.mustOK(t, "PUT", "/v1/clients/alice/tier", `{"tier":"free"}`)
	ln.mustOK(t, "PUT", "/v1/clients/dora/tier", `{"tier":"gold"}`)
	require.True(t, ln.allow(t, `{"client":"alice","cost":2}`).Allowed)
	require.True(t, ln.allow(t, `{"client":"bob","cost":3,"request_id":"r1"}`).Allowed)
	clock.Advance(500 * time.Millisecond) // alice: 3.5 tokens
	watched := []string{"alice", "bob", "carol", "dora"}

	snapshot := func(t *testing.T) map[string]string {
		t.Helper()
		s := map[string]string{"/v1/tiers": string(ln.mustOK(t, "GET", "/v1/tiers", "").body)}
		for _, c := range watched {
			p := "/v1/clients/" + c
			s[p] = string(ln.mustOK(t, "GET", p, "").body)
		}
		return s
	}
	start := snapshot(t)
	require.Contains(t, start["/v1/clients/alice"], `"remaining_exact":"3.5"`)
	require.Contains(t, start["/v1/clients/carol"], `"known":false`)
	require.Contains(t, start["/v1/clients/dora"], `"assigned_tier":"gold"`)

	long := func(n int) string { return strings.Repeat("x", n) }
	allow := func(name, body string, code api.Code, field string) badRow {
		return badRow{name: name, method: "POST", path: "/v1/allow", body: body, status: 400, code: code, field: field}
	}
	batch := func(name, body string, status int, code api.Code, field string) badRow {
		return badRow{name: "batch: " + name, method: "POST", path: "/v1/allow/batch", body: body, status: status, code: code, field: field}
	}
	tier := func(name, path, body string, code api.Code, field string) badRow {
		return badRow{name: name, method: "PUT", path: path, body: body, status: 400, code: code, field: field}
	}
	var many strings.Builder
	many.WriteString(`{"requests":[`)
	for i := range httpapi.DefaultMaxBatch + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"client":%q}`, watched[i%len(watched)])
	}
	many.WriteString("]}")

	rows := []badRow{
		// JSON shape.
		allow("malformed JSON", `{"client":"alice",`, api.CodeInvalidJSON, "client"),
		allow("malformed JSON key", `{client:"alice"}`, api.CodeInvalidJSON, "malformed JSON"),
		allow("trailing JSON after the object", `{"client":"alice"} []`, api.CodeInvalidJSON, "after the JSON object"),
		allow("two objects", `{"client":"alice"}{"client":"bob"}`, api.CodeInvalidJSON, "after the JSON object"),
		allow("unknown field", `{"client":"alice","tokens":1}`, api.CodeUnknownField, "tokens"),
		allow("duplicate field", `{"client":"alice","cost":1,"cost":2}`, api.CodeDuplicateField, "cost"),
		// Client ids.
		allow("missing client", `{"cost":1}`, api.CodeInvalidClient, "client"),
		allow("empty client", `{"client":""}`, api.CodeInvalidClient, "client"),
		allow("client over 256 bytes", fmt.Sprintf(`{"client":%q}`, long(257)), api.CodeInvalidClient, "client"),
		allow("client with a control char", `{"client":"ali\u0007ce"}`, api.CodeInvalidClient, "client"),
		allow("invalid UTF-8 client", "{\"client\":\"ali\xffce\"}", api.CodeInvalidClient, "client"),
		// Costs, on a client with a partial balance.
		allow("cost -1", `{"client":"alice","cost":-1}`, api.CodeInvalidCost, "cost"),
		allow("cost 1.5", `{"client":"alice","cost":1.5}`, api.CodeInvalidCost, "cost"),
		allow(`cost "1"`, `{"client":"alice","cost":"1"}`, api.CodeInvalidCost, "cost"),
		allow("cost 1e10 above max", `{"client":"alice","cost":1e10}`, api.CodeInvalidCost, "cost"),
		allow("cost 1e400", `{"client":"alice","cost":1e400}`, api.CodeInvalidCost, "cost"),
		allow("cost 1e1000000000", `{"client":"alice","cost":1e1000000000}`, api.CodeInvalidCost, "cost"),
		// Request ids.
		allow("request_id over 128 bytes", fmt.Sprintf(`{"client":"bob","request_id":%q}`, long(129)), api.CodeInvalidRequestID, "request_id"),
		allow("request_id with a control char", `{"client":"bob","request_id":"r\n1"}`, api.CodeInvalidRequestID, "request_id"),
		// Transport.
		{name: "body over 64 KiB", method: "POST", path: "/v1/allow", body: fmt.Sprintf(`{"client":"alice","request_id":%q}`, long(httpapi.DefaultMaxBodyBytes)),
			status: 413, code: api.CodeBodyTooLarge, field: "body"},
		{name: "text/plain allow", method: "POST", path: "/v1/allow", ctype: "text/plain", body: `{"client":"alice"}`,
			status: 415, code: api.CodeUnsupportedMediaType, field: "Content-Type"},
		{name: "text/plain tier", method: "PUT", path: "/v1/tiers/free", ctype: "text/plain", body: `{"capacity":7,"refill_per_second":1}`,
			status: 415, code: api.CodeUnsupportedMediaType, field: "Content-Type"},
		// Batches: a bad batch decides nothing, not even its good elements.
		batch("empty", `{"requests":[]}`, 400, api.CodeEmptyBatch, "requests"),
		batch("1001 requests", many.String(), 400, api.CodeBatchTooLarge, "requests"),
		batch("one bad element", `{"requests":[{"client":"alice"},{"client":"carol","cost":2},{"client":"bob","cost":-1},{"client":"dora"}]}`,
			400, api.CodeInvalidCost, "requests[2].cost"),
		batch("one bad client", `{"requests":[{"client":"carol"},{"client":""}]}`, 400, api.CodeInvalidClient, "requests[1].client"),
		// Policies, on an existing tier, a new one and the default.
		tier("capacity 0", "/v1/tiers/free", `{"capacity":0,"refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		tier("capacity -1", "/v1/tiers/free", `{"capacity":-1,"refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		tier("capacity 1.5", "/v1/tiers/free", `{"capacity":1.5,"refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		tier("capacity missing", "/v1/tiers/gold", `{"refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		tier("refill_per_second -1", "/v1/tiers/free", `{"capacity":5,"refill_per_second":-1}`, api.CodeInvalidPolicy, "refill_per_second"),
		tier(`refill_per_second "NaN"`, "/v1/tiers/free", `{"capacity":5,"refill_per_second":"NaN"}`, api.CodeInvalidPolicy, "refill_per_second"),
		tier("NaN literal", "/v1/tiers/free", `{"capacity":NaN,"refill_per_second":1}`, api.CodeInvalidJSON, "capacity"),
		tier("Infinity literal", "/v1/tiers/gold", `{"capacity":5,"refill_per_second":Infinity}`, api.CodeInvalidJSON, "refill_per_second"),
		tier("refill 1e-10", "/v1/tiers/free", `{"capacity":5,"refill_per_second":0.0000000001}`, api.CodeInvalidPolicy, "refill_per_second"),
		tier(`tier name "Bad Name"`, "/v1/tiers/Bad%20Name", `{"capacity":5,"refill_per_second":1}`, api.CodeInvalidTierName, "tier"),
		tier(`tier name "default"`, "/v1/tiers/default", `{"capacity":5,"refill_per_second":1}`, api.CodeInvalidTierName, "tier"),
		tier("default capacity 0", "/v1/default", `{"capacity":0,"refill_per_second":1}`, api.CodeInvalidPolicy, "capacity"),
		tier("default refill missing", "/v1/default", `{"capacity":5}`, api.CodeInvalidPolicy, "refill_per_second"),
		{name: "DELETE missing tier", method: "DELETE", path: "/v1/tiers/gold", status: 404, code: api.CodeTierNotFound, field: `tier: "gold"`},
		// Client tier assignments.
		tier("assign invalid tier name", "/v1/clients/alice/tier", `{"tier":"Bad Name"}`, api.CodeInvalidTierName, "tier"),
		tier("assign tier default", "/v1/clients/bob/tier", `{"tier":"default"}`, api.CodeInvalidTierName, "tier"),
		tier("assign empty tier", "/v1/clients/dora/tier", `{"tier":""}`, api.CodeInvalidTierName, "tier"),
		// Routing.
		{name: "unknown route", method: "GET", path: "/v1/nowhere", status: 404, code: api.CodeNotFound, field: "/v1/nowhere"},
		{name: "unknown route POST", method: "POST", path: "/v1/allows", body: `{"client":"alice"}`, status: 404, code: api.CodeNotFound, field: "/v1/allows"},
		{name: "wrong method", method: "GET", path: "/v1/allow", status: 405, code: api.CodeMethodNotAllowed, field: "GET"},
		{name: "wrong method on default", method: "DELETE", path: "/v1/default", status: 405, code: api.CodeMethodNotAllowed, field: "DELETE"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			ctype := row.ctype
			if ctype == "" && row.body != "" {
				ctype = "application/json"
			}
			var body []byte
			if row.body != "" {
				body = []byte(row.body)
			}
			r := ln.do(t, row.method, row.path, ctype, body)
			require.Equal(t, row.status, r.status, "%s %s %.200s: %s", row.method, row.path, row.body, r.body)
			e := decodeStrict[api.ErrorBody](t, r.body).Error
			t.Logf("%d %s: %s", r.status, e.Code, e.Message)
			assert.Equal(t, row.code, e.Code, "message: %s", e.Message)
			assert.Contains(t, e.Message, row.field, "the message must name the field")
			assert.Equal(t, "application/json", r.header.Get("Content-Type"))
			if row.status == http.StatusMethodNotAllowed {
				assert.NotEmpty(t, r.header.Get("Allow"))
			}
			assert.Equal(t, start, snapshot(t), "bad input changed the state")
		})
	}

	// The state is still live: the next request is decided from it.
	d := ln.allow(t, `{"client":"alice","cost":3}`)
	assert.True(t, d.Allowed)
	assert.Equal(t, "0.5", ln.getClient(t, "alice").RemainingExact)
	assert.Equal(t, int64(10), ln.getClient(t, "carol").Remaining, "the bad batch must not have decided carol")
}

// TestNodeRestartKeepsStateOverHTTP restarts the node on the same data dir
// and checks over HTTP that balances, assignments and policies survive.
func TestNodeRestartKeepsStateOverHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := newManualClock()
	ln := startLiveNode(t, dir, clock)
	ln.putPolicy(t, "/v1/tiers/pro", `{"capacity": 100, "refill_per_second": 0.25}`)
	ln.mustOK(t, "PUT", "/v1/clients/carol/tier", `{"tier":"pro"}`)
	for range 30 {
		require.True(t, ln.allow(t, `{"client":"carol"}`).Allowed)
	}
	ln.allow(t, `{"client":"dave","cost":4}`)
	clock.Advance(2 * time.Second) // carol: 70.5 tokens
	beforeTiers := ln.getTiers(t)
	carol, dave := ln.getClient(t, "carol"), ln.getClient(t, "dave")
	require.Equal(t, "70.5", carol.RemainingExact)
	require.Equal(t, "8", dave.RemainingExact)
	ln.close(t)

	ln2 := startLiveNode(t, dir, clock)
	assert.Equal(t, beforeTiers, ln2.getTiers(t), "tiers and version")
	assert.Equal(t, carol, ln2.getClient(t, "carol"), "carol")
	assert.Equal(t, dave, ln2.getClient(t, "dave"), "dave")

	// The old bucket continues: 70.5 tokens, so 70 taken leaves 0.5.
	d := ln2.allow(t, `{"client":"carol","cost":70}`)
	assert.True(t, d.Allowed)
	assert.Equal(t, int64(0), d.Remaining)
	assert.Equal(t, "pro", d.Tier)
	assert.False(t, ln2.allow(t, `{"client":"carol"}`).Allowed, "the bucket continues, it is not fresh")
	assert.Equal(t, "0.5", ln2.getClient(t, "carol").RemainingExact)
}

// TestNodeRequestIDOverHTTP sends the same request id twice: the second
// answer is the first decision, marked duplicate, and takes nothing.
func TestNodeRequestIDOverHTTP(t *testing.T) {
	t.Parallel()
	clock := newManualClock()
	ln := startLiveNode(t, t.TempDir(), clock)
	body := `{"client":"erin","cost":4,"request_id":"req-1"}`
	first := ln.allow(t, body)
	require.True(t, first.Allowed)
	assert.False(t, first.Duplicate)
	clock.Advance(time.Millisecond)
	again := ln.allow(t, body)
	assert.True(t, again.Duplicate, "the retry must be marked duplicate")
	again.Duplicate = false
	assert.Equal(t, first, again, "the retry gets the original decision")
	assert.Equal(t, "6.001", ln.getClient(t, "erin").RemainingExact, "the balance dropped once")

	// Another request id is a new decision.
	other := ln.allow(t, `{"client":"erin","cost":4,"request_id":"req-2"}`)
	assert.False(t, other.Duplicate)
	assert.Equal(t, int64(2), other.Remaining)
}

// A real node's decision answers carry its routes version, the one GET
// /v1/routes answers, and the deciding policy's rate with the draft's
// fields.
func TestNodeDecisionAnswersCarryRoutesVersionAndRate(t *testing.T) {
	t.Parallel()
	ln := startLiveNode(t, t.TempDir(), newManualClock())
	ln.putPolicy(t, "/v1/tiers/pro", `{"capacity": 20, "refill_per_second": 2.5}`)
	ln.mustOK(t, "PUT", "/v1/clients/pat/tier", `{"tier":"pro"}`)
	routes := decodeStrict[api.RoutesResponse](t, ln.mustOK(t, "GET", "/v1/routes", "").body)
	require.NotZero(t, routes.Version, "every group has had a term")
	assert.Equal(t, ln.node.Routes().Version, ln.node.RoutesVersion())

	r := ln.mustOK(t, "POST", "/v1/allow", `{"client":"pat","cost":5}`)
	assert.Equal(t, fmt.Sprint(routes.Version), r.header.Get(api.HeaderRoutesVersion), "POST /v1/allow")
	got := decodeStrict[api.AllowResponse](t, r.body)
	assert.Equal(t, json.Number("2.5"), got.RefillPerSecond)
	assert.Equal(t, `"pro";q=20;w=8`, r.header.Get("RateLimit-Policy"))
	assert.Equal(t, `"pro";r=15;t=2`, r.header.Get("RateLimit"))

	r = ln.mustOK(t, "POST", "/v1/allow/batch", `{"requests":[{"client":"pat"},{"client":"bob"}]}`)
	assert.Equal(t, fmt.Sprint(routes.Version), r.header.Get(api.HeaderRoutesVersion), "POST /v1/allow/batch")
	batch := decodeStrict[api.BatchResponse](t, r.body)
	require.Len(t, batch.Results, 2)
	assert.Equal(t, json.Number("2.5"), batch.Results[0].RefillPerSecond)
	assert.Equal(t, json.Number(bucket.BuiltinDefault.RateString()), batch.Results[1].RefillPerSecond, "the default's rate")
}

// TestNodeMetrics checks that /metrics serves the API's and the node's
// metrics from the shared registry.
func TestNodeMetrics(t *testing.T) {
	t.Parallel()
	ln := startLiveNode(t, t.TempDir(), newManualClock())
	ln.putPolicy(t, "/v1/tiers/one", `{"capacity": 1, "refill_per_second": 0}`)
	ln.mustOK(t, "PUT", "/v1/clients/fay/tier", `{"tier":"one"}`)
	assert.True(t, ln.allow(t, `{"client":"fay"}`).Allowed)
	assert.False(t, ln.allow(t, `{"client":"fay"}`).Allowed)
	ln.mustOK(t, "POST", "/v1/allow/batch", `{"requests":[{"client":"g1"},{"client":"g2"}]}`)

	r := ln.mustOK(t, "GET", "/metrics", "")
	text := string(r.body)
	for _, want := range []string{
		`quorate_decisions_total{outcome="allowed",tier="one"} 1`,
		`quorate_decisions_total{outcome="denied",tier="one"} 1`,
		`quorate_decisions_total{outcome="allowed",tier="default"} 2`,
		`quorate_raft_entry_decisions_count `,
		`quorate_raft_state{group="meta"} 2`,
		`quorate_raft_state{group="0"} 2`,
		`quorate_raft_state{group="3"} 2`,
		`quorate_http_requests_total{code="200",route="POST /v1/allow"} 2`,
	} {
		assert.Contains(t, text, want)
	}
}

// TestNodeClusterHealthReady checks /v1/cluster, /readyz and /healthz on a
// single node that leads every group.
func TestNodeClusterHealthReady(t *testing.T) {
	t.Parallel()
	ln := startLiveNode(t, t.TempDir(), newManualClock())
	st := decodeStrict[api.ClusterStatus](t, ln.mustOK(t, "GET", "/v1/cluster", "").body)
	assert.Equal(t, "n1", st.NodeID)
	require.Len(t, st.Nodes, 1)
	assert.Equal(t, "n1", st.Nodes[0].ID)
	assert.Equal(t, "alive", st.Nodes[0].State)
	var ids []string
	for _, g := range st.Groups {
		ids = append(ids, g.ID)
		assert.Equal(t, "Leader", g.State, "group %s", g.ID)
		assert.Equal(t, "n1", g.Leader, "group %s", g.ID)
		assert.Equal(t, []string{"n1"}, g.Voters, "group %s", g.ID)
		assert.GreaterOrEqual(t, g.ConfigVersion, uint64(1), "group %s", g.ID)
	}
	assert.Equal(t, []string{"meta", "0", "1", "2", "3"}, ids)

	for path, want := range map[string]string{"/readyz": "ready", "/healthz": "ok"} {
		r := ln.mustOK(t, "GET", path, "")
		assert.Equal(t, want, decodeStrict[api.StatusResponse](t, r.body).Status, path)
	}
}

// POST /v1/clients/{client}/reset on a real node: the drained bucket is
// full at the next decision, the tier assignment stays, and a reset of a
// client without a bucket says so.
func TestNodeResetClient(t *testing.T) {
	ln := startLiveNode(t, t.TempDir(), newManualClock())
	require.Eventually(t, func() bool { return ln.node.ClusterVersion() >= 2 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, http.StatusOK, ln.do(t, "PUT", "/v1/tiers/free", "application/json", []byte(`{"capacity":3,"refill_per_second":0}`)).status)
	require.Equal(t, http.StatusOK, ln.do(t, "PUT", "/v1/clients/alice/tier", "application/json", []byte(`{"tier":"free"}`)).status)
	drain := ln.do(t, "POST", "/v1/allow", "application/json", []byte(`{"client":"alice","cost":3}`))
	require.Equal(t, http.StatusOK, drain.status, "%s", drain.body)

	r := ln.do(t, "POST", "/v1/clients/alice/reset", "", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var out api.ResetResponse
	require.NoError(t, json.Unmarshal(r.body, &out))
	assert.Equal(t, api.ResetResponse{Client: "alice", HadBucket: true}, out)

	var d api.AllowResponse
	a := ln.do(t, "POST", "/v1/allow", "application/json", []byte(`{"client":"alice","cost":3}`))
	require.NoError(t, json.Unmarshal(a.body, &d))
	assert.True(t, d.Allowed, "full again: %s", a.body)
	assert.Equal(t, "free", d.Tier)

	r = ln.do(t, "POST", "/v1/clients/nobody/reset", "", nil)
	require.NoError(t, json.Unmarshal(r.body, &out))
	assert.Equal(t, api.ResetResponse{Client: "nobody", HadBucket: false}, out)
	bad := ln.do(t, "POST", "/v1/clients/"+strings.Repeat("x", api.MaxClientLen+1)+"/reset", "", nil)
	assert.Equal(t, http.StatusBadRequest, bad.status, "%s", bad.body)
}
