package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
)

// fakeService is a Service made of function fields. It counts every call,
// so tests can check that bad input never reaches the service. A nil field
// answers an error (a 500).
type fakeService struct {
	calls atomic.Int64

	allow         func(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error)
	client        func(ctx context.Context, client string) (fsm.ClientView, error)
	setClientTier func(ctx context.Context, client, tier string) error
	resetClient   func(ctx context.Context, client string) (bool, error)
	changeConfig  func(ctx context.Context, op fsm.ConfigOp) (api.ConfigChange, error)
	config        func(ctx context.Context) (bucket.Config, error)
	status        func(ctx context.Context) (api.ClusterStatus, error)
	ready         func(ctx context.Context) error
	policyOf      func(client string) (string, bucket.Policy)
	audit         func(ctx context.Context, since uint64, limit int) (fsm.AuditPage, error)
	routes        cluster.Routes
	// actor is the actor of the last change the service was asked for.
	actor atomic.Pointer[string]
}

// PolicyOf answers the default policy unless f.policyOf says otherwise.
func (f *fakeService) PolicyOf(client string) (string, bucket.Policy) {
	if f.policyOf == nil {
		return bucket.DefaultTierName, bucket.BuiltinDefault
	}
	return f.policyOf(client)
}

func (f *fakeService) Routes() cluster.Routes { return f.routes }

// RoutesVersion is the version of f.routes, as a node's is its routes'.
func (f *fakeService) RoutesVersion() uint64 { return f.routes.Version }

var _ Service = (*fakeService)(nil)

var errNotConfigured = errors.New("fake: method not configured")

func (f *fakeService) Allow(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
	f.calls.Add(1)
	if f.allow == nil {
		return nil, errNotConfigured
	}
	return f.allow(ctx, reqs)
}

func (f *fakeService) Client(ctx context.Context, client string) (fsm.ClientView, error) {
	f.calls.Add(1)
	if f.client == nil {
		return fsm.ClientView{}, errNotConfigured
	}
	return f.client(ctx, client)
}

func (f *fakeService) SetClientTier(ctx context.Context, client, tier, actor string) error {
	f.calls.Add(1)
	f.actor.Store(&actor)
	if f.setClientTier == nil {
		return errNotConfigured
	}
	return f.setClientTier(ctx, client, tier)
}

func (f *fakeService) ResetClient(ctx context.Context, client, actor string) (bool, error) {
	f.calls.Add(1)
	f.actor.Store(&actor)
	if f.resetClient == nil {
		return false, errNotConfigured
	}
	return f.resetClient(ctx, client)
}

func (f *fakeService) ChangeConfig(ctx context.Context, op fsm.ConfigOp) (api.ConfigChange, error) {
	f.calls.Add(1)
	f.actor.Store(&op.Actor)
	if f.changeConfig == nil {
		return api.ConfigChange{}, errNotConfigured
	}
	return f.changeConfig(ctx, op)
}

func (f *fakeService) Audit(ctx context.Context, since uint64, limit int) (fsm.AuditPage, error) {
	f.calls.Add(1)
	if f.audit == nil {
		return fsm.AuditPage{}, errNotConfigured
	}
	return f.audit(ctx, since, limit)
}

// lastActor is the actor of the last change f was asked for.
func (f *fakeService) lastActor() string {
	if a := f.actor.Load(); a != nil {
		return *a
	}
	return ""
}

func (f *fakeService) Config(ctx context.Context) (bucket.Config, error) {
	f.calls.Add(1)
	if f.config == nil {
		return bucket.Config{}, errNotConfigured
	}
	return f.config(ctx)
}

func (f *fakeService) Status(ctx context.Context) (api.ClusterStatus, error) {
	f.calls.Add(1)
	if f.status == nil {
		return api.ClusterStatus{}, errNotConfigured
	}
	return f.status(ctx)
}

func (f *fakeService) Ready(ctx context.Context) error {
	f.calls.Add(1)
	if f.ready == nil {
		return errNotConfigured
	}
	return f.ready(ctx)
}

// t0 is the fake clock's start (nanoseconds since the epoch).
const t0 = int64(1_700_000_000) * int64(time.Second)

// fakeClock is the leader's clock for an FSM-backed fake: it moves only
// when a test advances it.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() int64              { return c.ns.Load() }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// newFSMService returns a fake whose methods run a real *fsm.FSM, one group,
// stamping commands with the returned clock (starting at t0), as a
// single-node cluster would.
func newFSMService(t *testing.T) (*fakeService, *fakeClock) {
	t.Helper()
	f, err := fsm.New(fsm.Options{})
	require.NoError(t, err)
	clk := &fakeClock{}
	clk.ns.Store(t0)
	svc := &fakeService{
		allow: func(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
			res := f.ApplyCommand(fsm.Encode(fsm.Allow{Stamp: clk.now(), Requests: reqs}))
			return res.(*fsm.AllowResult).Decisions, nil
		},
		client: func(ctx context.Context, client string) (fsm.ClientView, error) {
			return f.View(client, clk.now()), nil
		},
		setClientTier: func(ctx context.Context, client, tier string) error {
			f.ApplyCommand(fsm.Encode(fsm.SetTier{Client: client, Tier: tier}))
			return nil
		},
		changeConfig: func(ctx context.Context, op fsm.ConfigOp) (api.ConfigChange, error) {
			res := f.ApplyCommand(fsm.Encode(op)).(*fsm.ConfigResult)
			if res.Err != nil {
				return api.ConfigChange{}, fmt.Errorf("meta group: %w", res.Err)
			}
			return api.ConfigChange{Version: res.Version, Applied: []string{"0"}}, nil
		},
		config: func(ctx context.Context) (bucket.Config, error) { return f.Config(), nil },
		status: func(ctx context.Context) (api.ClusterStatus, error) {
			return api.ClusterStatus{
				NodeID: "n1",
				Nodes:  []api.NodeStatus{{ID: "n1", State: "alive"}},
				Groups: []api.GroupStatus{{ID: "0", State: "Leader", Leader: "n1", Term: 2, Voters: []string{"n1"}}},
			}, nil
		},
		ready: func(ctx context.Context) error { return nil },
	}
	return svc, clk
}

// testServer is a Server on loopback with its own metrics registry.
type testServer struct {
	*httptest.Server
	api *Server
	reg *prometheus.Registry
}

func newTestServer(t *testing.T, svc Service, opts Options) *testServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	api := New(svc, opts)
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return &testServer{Server: ts, api: api, reg: reg}
}

// answer is a response with its body read.
type testAnswer struct {
	status int
	header http.Header
	body   []byte
}

// send makes one request; hdr is alternating header names and values. A
// body is sent with Content-Type application/json unless hdr sets one.
func (ts *testServer) send(t *testing.T, method, path, body string, hdr ...string) testAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	return ts.do(t, req)
}

func (ts *testServer) do(t *testing.T, req *http.Request) testAnswer {
	t.Helper()
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return testAnswer{status: resp.StatusCode, header: resp.Header, body: b}
}

// errorOf decodes an error answer, failing the test if it is not one.
func errorOf(t *testing.T, a testAnswer) api.ErrorDetail {
	t.Helper()
	var eb api.ErrorBody
	decodeJSON(t, a.body, &eb)
	require.NotEmpty(t, eb.Error.Code, "error body %s", a.body)
	require.NotEmpty(t, eb.Error.Message, "error body %s", a.body)
	return eb.Error
}

// decodeJSON decodes an answer body into v, refusing unknown fields so the
// exported types and the answers cannot drift apart.
func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "body %s", b)
}

// tokenBucketJSON is a token bucket as the server writes it.
func tokenBucketJSON(capacity int64, rate string) api.Policy {
	return api.Policy{Algorithm: "token_bucket", Capacity: capacity, RefillPerSecond: json.Number(rate), Mode: "enforce", WhenUnavailable: "deny"}
}
