package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
)

// Mode is what Allow answers when no node can decide in time.
type Mode int

const (
	// FailClosed denies: the answer is Allowed false, Degraded true. It adds
	// nothing to what the cluster's bound admits; callers are refused while
	// the cluster is unreachable.
	FailClosed Mode = iota
	// FailOpen admits: the answer is Allowed true, Degraded true. While the
	// cluster is unreachable nothing is limited.
	FailOpen
	// FailLocal decides with a bucket held in this process: the client's
	// tier's capacity and rate divided by Config.Instances. The tier and
	// its policy are the cluster's last answer for the client; a client it
	// never answered for gets the default policy as an answer for another
	// client gave it; without either, Config.LocalPolicy; without that, the
	// answer is a denial.
	FailLocal
)

func (m Mode) String() string {
	switch m {
	case FailClosed:
		return "fail_closed"
	case FailOpen:
		return "fail_open"
	case FailLocal:
		return "fail_local"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Defaults of Config.
const (
	DefaultTimeout        = 2 * time.Second
	DefaultAttemptTimeout = 700 * time.Millisecond
	DefaultMaxBatch       = 256
	DefaultMaxInflight    = 1
	DefaultMaxLocal       = 100_000
)

// Config configures a Client (New). Only Endpoints is required.
type Config struct {
	// Endpoints are the nodes' base URLs ("https://10.0.0.1:7070"); a bare
	// "host:port" means http. Any one is enough to learn the others'
	// leaderships from GET /v1/routes; the more are given, the more of them
	// can be down when the client starts.
	Endpoints []string
	// Token is sent as "Authorization: Bearer <token>" ("" sends none). A
	// decide-role token is enough for Allow.
	Token string
	// TLS configures https endpoints (nil: the system's roots). Ignored when
	// HTTPClient is set.
	TLS *tls.Config
	// HTTPClient, if set, carries every call: through its Transport
	// alone where it has no Jar, Timeout or CheckRedirect of its own
	// (quorate never redirects, so a 3xx answer is an error), else through
	// its Do. Its Timeout should be 0: the client bounds each attempt
	// itself.
	HTTPClient *http.Client

	// OnUnavailable is what Allow answers when no node decided before the
	// deadline (default FailClosed).
	OnUnavailable Mode
	// Timeout bounds an Allow whose context has no deadline (default
	// DefaultTimeout). Give a deadline longer than a failover (about one
	// second) for a decision to survive a node's loss.
	Timeout time.Duration
	// AttemptTimeout bounds one attempt at one node (default
	// DefaultAttemptTimeout), so a paused node costs one attempt, not the
	// whole deadline. The node is told it as its own deadline.
	AttemptTimeout time.Duration

	// BreakFor, when positive, makes a call that no node decided by its
	// deadline open a breaker for that long: until then calls are answered
	// by OnUnavailable at once, without waiting out their deadlines, and
	// one call per BreakFor goes to the cluster as a probe; the first
	// decision closes the breaker. Zero (the default): every call waits
	// out its deadline. Worth it with FailOpen or FailLocal, where a caller
	// should not wait the deadline on every request of an outage; with
	// FailClosed it denies every caller for BreakFor after a slow moment.
	BreakFor time.Duration

	// Instances is the number of processes that share the cluster's limits
	// (FailLocal divides each policy by it; default 1).
	Instances int
	// LocalPolicy is FailLocal's policy for a client the cluster has not
	// answered for yet (nil: such a client is denied).
	LocalPolicy *bucket.Policy
	// MaxLocal bounds the clients FailLocal remembers (default
	// DefaultMaxLocal); past it, new clients are treated as unknown.
	MaxLocal int

	// NoCoalesce sends every decision as its own POST /v1/allow. By default
	// concurrent decisions bound for one node, while MaxInflight calls to it
	// are outstanding, travel together as one POST /v1/allow/batch: the
	// node decides each group's part as one raft entry, in parallel. Before
	// each next call leaves, callers the last one answered that ask again
	// at once are given a moment (a few yields of the processor) to join it.
	NoCoalesce bool
	// CoalesceWindow is how long a decision that finds its node idle waits
	// for company before it is sent (default 0: it goes at once).
	CoalesceWindow time.Duration
	// MaxBatch bounds the decisions in one coalesced call (default
	// DefaultMaxBatch; the server takes up to 1,000).
	MaxBatch int
	// MaxInflight is the number of coalesced calls outstanding to one node
	// before the next decisions for it wait to travel together (default
	// DefaultMaxInflight: 1 measured best; against one node, 64 goroutines,
	// two in flight decided x0.92-x1.08 what one did, with more CPU per
	// decision on both sides).
	MaxInflight int

	// Now is the client's clock (time.Now if nil); FailLocal's buckets and
	// the quarantine of failing nodes read it.
	Now func() time.Time
}

// Client decides through a quorate cluster. It is safe for concurrent use
// by many goroutines; create one per process and share it.
//
// Each decision goes straight to its group's leader, as GET /v1/routes
// names it (refreshed when a node answers with a newer routes version, when
// the leader fails, or when a group has none); a node that does not lead the
// group forwards, so a stale table costs a hop, never a wrong answer. Every
// decision carries a request id (one is made for a call without one), so an
// attempt whose outcome is unknown is retried, on any node, without
// spending twice.
type Client struct {
	cfg    Config
	hc     *http.Client
	do     carrier // hc's, chosen once (carrierOf)
	auth   string
	now    func() time.Time
	ids    *idSource
	nodes  *nodeSet
	routes *routeTable
	local  *localLimiter
	stats  counters

	lanesMu sync.Mutex
	lanes   map[string]*lane // by node

	// broken is when the breaker (Config.BreakFor) closes, Unix ns; 0: closed.
	broken atomic.Int64

	closed chan struct{}
	close  sync.Once
	bg     sync.WaitGroup
}

// New returns a Client for cfg. It does not contact the cluster: the first
// Allow (or Refresh) learns the routes.
func New(cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("client: Config.Endpoints is empty")
	}
	eps := make([]string, 0, len(cfg.Endpoints))
	for _, e := range cfg.Endpoints {
		u, err := baseURL(e)
		if err != nil {
			return nil, err
		}
		eps = append(eps, u)
	}
	cfg.Endpoints = eps
	if cfg.OnUnavailable < FailClosed || cfg.OnUnavailable > FailLocal {
		return nil, fmt.Errorf("client: Config.OnUnavailable %d is not a Mode", int(cfg.OnUnavailable))
	}
	if cfg.LocalPolicy != nil {
		if err := cfg.LocalPolicy.Validate(); err != nil {
			return nil, fmt.Errorf("client: Config.LocalPolicy: %w", err)
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	if cfg.Instances <= 0 {
		cfg.Instances = 1
	}
	if cfg.MaxLocal <= 0 {
		cfg.MaxLocal = DefaultMaxLocal
	}
	if cfg.MaxBatch <= 0 || cfg.MaxBatch > 1000 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{
			Proxy:               nil, // a limiter is called directly, never through an environment proxy
			DialContext:         (&net.Dialer{Timeout: cfg.AttemptTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:     cfg.TLS,
			TLSHandshakeTimeout: cfg.AttemptTimeout,
			MaxIdleConns:        0,
			MaxIdleConnsPerHost: 512,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	c := &Client{
		cfg:    cfg,
		hc:     hc,
		do:     carrierOf(hc),
		now:    cfg.Now,
		ids:    newIDSource(),
		nodes:  newNodeSet(eps, cfg.Now),
		routes: &routeTable{},
		lanes:  map[string]*lane{},
		closed: make(chan struct{}),
	}
	if cfg.Token != "" {
		c.auth = "Bearer " + cfg.Token
	}
	if cfg.OnUnavailable == FailLocal {
		c.local = newLocalLimiter(cfg.Instances, cfg.LocalPolicy, cfg.MaxLocal)
	}
	return c, nil
}

// Close stops the client's background work (route refreshes) and closes
// its idle connections. Calls after Close still work but refresh nothing.
func (c *Client) Close() error {
	c.close.Do(func() { close(c.closed) })
	c.bg.Wait()
	c.hc.CloseIdleConnections()
	return nil
}

// Allow asks whether client may spend cost tokens (0 peeks without
// spending). A denial is not an error: see Allowed in the answer.
//
// Allow retries where it is safe, within ctx's deadline (or
// Config.Timeout): an answer of kind retry_safe goes to another node, one of
// kind unknown is repeated with the same request id. When the deadline
// passes without a decision, the answer is Config.OnUnavailable's, with
// Degraded set. The error is non-nil only for a refused request (bad input,
// a token without the role: an *Error of kind api.Refused) or a cancelled
// ctx.
func (c *Client) Allow(ctx context.Context, client string, cost int64) (api.AllowResponse, error) {
	return c.Do(ctx, api.AllowRequest{Client: client, Cost: &cost})
}

// Do is Allow for a request the caller built: with its own request id (an
// idempotency key the caller carries from its own caller), say. A request
// without one is given one; a nil Cost costs 1.
func (c *Client) Do(ctx context.Context, req api.AllowRequest) (api.AllowResponse, error) {
	c.stats.calls.Add(1)
	if c.breakerOpen() {
		c.stats.broken.Add(1)
		return c.unavailable(req), nil
	}
	if req.RequestID == "" {
		req.RequestID = c.ids.next()
	}
	if req.Cost == nil {
		one := int64(1)
		req.Cost = &one
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
		deadline, _ = ctx.Deadline()
	}
	resp, err := c.decide(ctx, req, deadline)
	switch {
	case err == nil:
		c.stats.decided.Add(1)
		c.local.learn(req.Client, resp)
		c.broken.Store(0)
		return resp, nil
	case err.Kind() == api.Refused:
		c.stats.refused.Add(1)
		return api.AllowResponse{}, err
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return api.AllowResponse{}, ctx.Err()
	}
	if c.cfg.BreakFor > 0 {
		c.broken.Store(c.now().Add(c.cfg.BreakFor).UnixNano())
	}
	return c.unavailable(req), nil
}

// breakerOpen reports whether a call is to be answered by OnUnavailable at
// once (Config.BreakFor). When the breaker's time is up, the first call to
// see it goes to the cluster as a probe, moving the time on so that the
// calls meanwhile do not.
func (c *Client) breakerOpen() bool {
	until := c.broken.Load()
	if until == 0 {
		return false
	}
	now := c.now().UnixNano()
	if now < until {
		return true
	}
	return !c.broken.CompareAndSwap(until, now+int64(c.cfg.BreakFor)) // lost the race: another call probes
}

// decide runs attempts until one is decided or refused, or the deadline
// passes, and returns the last failure.
func (c *Client) decide(ctx context.Context, req api.AllowRequest, deadline time.Time) (api.AllowResponse, *Error) {
	group, leader := c.routes.leaderOf(req.Client)
	if group < 0 || leader == "" {
		c.refreshRoutes("")
	}
	var (
		tried   []string
		last    *Error
		backoff = 5 * time.Millisecond
	)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			c.stats.retries.Add(1)
			group, leader = c.routes.leaderOf(req.Client)
		}
		node := c.nodes.pick(group, leader, tried, c.routes.nodes())
		if node == "" { // every node tried: wait, then start over
			tried = tried[:0]
			wait := min(backoff+rand.N(backoff), time.Until(deadline))
			backoff = min(2*backoff, 200*time.Millisecond)
			t := time.NewTimer(max(wait, 0))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return api.AllowResponse{}, orLost(last, ctx.Err())
			}
			continue
		}
		tried = append(tried, node)
		resp, err := c.attempt(ctx, node, group, req, deadline)
		if err == nil {
			c.nodes.succeeded(node, group)
			return resp, nil
		}
		last = err
		if err.Kind() == api.Refused {
			return api.AllowResponse{}, err
		}
		c.nodes.failed(node, group, err)
		if node == leader {
			c.refreshRoutes("")
		}
		if ctx.Err() != nil || time.Until(deadline) <= 0 {
			return api.AllowResponse{}, last
		}
	}
}

func orLost(last *Error, err error) *Error {
	if last != nil {
		return last
	}
	return lost("", err)
}

// attempt sends req to node once, alone or coalesced with other callers'.
func (c *Client) attempt(ctx context.Context, node string, group int, req api.AllowRequest, deadline time.Time) (api.AllowResponse, *Error) {
	c.stats.attempts.Add(1)
	until := c.now().Add(c.cfg.AttemptTimeout)
	if deadline.Before(until) {
		until = deadline
	}
	done := traceStart(ctx, node, req)
	var (
		resp api.AllowResponse
		err  *Error
	)
	if c.cfg.NoCoalesce {
		resp, err = c.allowOne(ctx, node, req, until)
	} else {
		resp, err = c.laneFor(node).do(ctx, req, until)
	}
	if done != nil {
		done(AttemptResult{Response: resp, Err: err})
	}
	return resp, err
}

// Refresh fetches the routes now. Allow does it by itself when it needs to;
// a service may call Refresh at start to fail fast on a wrong endpoint list
// or token.
func (c *Client) Refresh(ctx context.Context) error {
	_, err := c.fetchRoutes(ctx, "")
	return err
}

// normalURL is an endpoint as the clients send to it: a bare "host:port"
// gets "http://", and no trailing slash.
func normalURL(e string) string {
	e = strings.TrimRight(strings.TrimSpace(e), "/")
	if e != "" && !strings.Contains(e, "://") {
		e = "http://" + e
	}
	return e
}

// baseURL is normalURL(e), refused when empty or neither http nor https.
func baseURL(e string) (string, error) {
	e = normalURL(e)
	if e == "" {
		return "", errors.New("client: an empty endpoint")
	}
	if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
		return "", fmt.Errorf("client: endpoint %q: only http and https", e)
	}
	return e, nil
}
