package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/client"
)

// callTimeout bounds one call, like a client's deadline.
const callTimeout = 10 * time.Second

// callerFactory returns how to make one caller per connection for
// cfg.mode, and what to release after the run.
func callerFactory(cfg config) (func(target string) (caller, error), func(), error) {
	switch cfg.mode {
	case "quorate", "gubernator":
		tr := &http.Transport{MaxIdleConnsPerHost: cfg.conns, MaxConnsPerHost: cfg.conns, IdleConnTimeout: time.Minute}
		hc := &http.Client{Transport: client.BearerTransport(tr, cfg.token), Timeout: callTimeout}
		if cfg.mode == "gubernator" {
			return func(target string) (caller, error) {
				return newGubernatorCaller(hc, target, cfg.policy), nil
			}, tr.CloseIdleConnections, nil
		}
		return func(target string) (caller, error) {
			q := &quorateCaller{hc: hc, target: strings.TrimRight(target, "/"), batch: cfg.batch > 1}
			if cfg.requestIDs {
				q.ids = fmt.Sprintf("%x-%d-", runID, callers.Add(1))
			}
			return q, nil
		}, tr.CloseIdleConnections, nil
	case "client":
		// One Go client (package client) shared by every connection, as a
		// service shares one: it routes each decision to its group's
		// leader and, unless -coalesce=false, coalesces concurrent ones.
		tr := &http.Transport{MaxIdleConnsPerHost: cfg.conns, IdleConnTimeout: time.Minute}
		c, err := client.New(client.Config{Endpoints: cfg.targets, Token: cfg.token, NoCoalesce: !cfg.coalesce,
			MaxInflight: cfg.inflight, HTTPClient: &http.Client{Transport: tr}, Timeout: callTimeout})
		if err != nil {
			return nil, nil, err
		}
		if err := c.Refresh(context.Background()); err != nil {
			return nil, nil, fmt.Errorf("reading the routes: %w", err)
		}
		return func(string) (caller, error) { return clientCaller{c}, nil }, func() { _ = c.Close() }, nil
	case "envoy":
		pool := &envoyPool{conns: map[string][]*grpc.ClientConn{}, next: map[string]int{}}
		return func(target string) (caller, error) {
			return pool.caller(strings.TrimPrefix(target, "grpc://"), cfg.token)
		}, pool.close, nil
	case "redis":
		sha, err := loadRedisScript(cfg.targets[0])
		if err != nil {
			return nil, nil, err
		}
		for _, t := range cfg.targets[1:] {
			if s, err := loadRedisScript(t); err != nil {
				return nil, nil, err
			} else if s != sha {
				return nil, nil, fmt.Errorf("redis %s: script hash %s, want %s", t, s, sha)
			}
		}
		return func(target string) (caller, error) {
			return newRedisCaller(target, sha, cfg.policy)
		}, func() {}, nil
	}
	return nil, nil, fmt.Errorf("-mode %q: want quorate, client, envoy, gubernator or redis", cfg.mode)
}

// quorateCaller posts to /v1/allow, or /v1/allow/batch when batch is set.
type quorateCaller struct {
	hc     *http.Client
	target string
	batch  bool
	buf    []byte
	ids    string // with -request-ids: the prefix of this caller's ids
	next   uint64 // the number of its next id
}

// runID and callers make request ids unique across runs and callers.
var (
	runID   = time.Now().UnixNano()
	callers atomic.Int64
)

// appendRequest appends one request of the body for key.
func (q *quorateCaller) appendRequest(b []byte, key string) []byte {
	b = append(b, `{"client":"`...)
	b = append(b, key...)
	if q.ids != "" {
		b = append(b, `","request_id":"`...)
		b = append(b, q.ids...)
		b = strconv.AppendUint(b, q.next, 10)
		q.next++
	}
	return append(b, `"}`...)
}

func (q *quorateCaller) call(ctx context.Context, keys []string) (int, error) {
	// Client ids are checked against prefixRE, so they need no JSON escaping.
	b := q.buf[:0]
	if !q.batch {
		b = q.appendRequest(b, keys[0])
		q.buf = b
		var out struct {
			Allowed bool `json:"allowed"`
		}
		if err := postJSON(ctx, q.hc, q.target+"/v1/allow", b, &out); err != nil {
			return 0, err
		}
		return boolInt(out.Allowed), nil
	}
	b = append(b, `{"requests":[`...)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = q.appendRequest(b, k)
	}
	b = append(b, `]}`...)
	q.buf = b
	var out struct {
		Results []struct {
			Allowed bool `json:"allowed"`
		} `json:"results"`
	}
	if err := postJSON(ctx, q.hc, q.target+"/v1/allow/batch", b, &out); err != nil {
		return 0, err
	}
	if len(out.Results) != len(keys) {
		return 0, fmt.Errorf("batch of %d answered with %d results", len(keys), len(out.Results))
	}
	n := 0
	for _, r := range out.Results {
		n += boolInt(r.Allowed)
	}
	return n, nil
}

func (q *quorateCaller) close() {}

// clientCaller decides through the shared Go client. An answer the
// cluster did not decide (the client's fail-closed answer) is an error.
type clientCaller struct{ c *client.Client }

func (cc clientCaller) call(ctx context.Context, keys []string) (int, error) {
	d, err := cc.c.Allow(ctx, keys[0], 1)
	switch {
	case err != nil:
		return 0, err
	case d.Degraded:
		return 0, errors.New("no node decided in time")
	}
	return boolInt(d.Allowed), nil
}

func (clientCaller) close() {}

// gubernatorCaller asks gubernator v2 for one hit of a LEAKY_BUCKET limit.
// Gubernator's TOKEN_BUCKET refills all at once when its duration ends (a
// fixed window); its LEAKY_BUCKET leaks limit hits per duration
// continuously with room for burst, which is quorate's token bucket:
// burst = limit = capacity, duration = capacity / rate.
type gubernatorCaller struct {
	hc            *http.Client
	target        string
	before, after []byte // the request around the key
	buf           []byte
}

func newGubernatorCaller(hc *http.Client, target string, p bucket.Policy) *gubernatorCaller {
	// duration in milliseconds = capacity × 1000 / (rate / Scale), rounded.
	durMs := (p.Capacity*1000*bucket.Scale + p.Rate/2) / p.Rate
	return &gubernatorCaller{
		hc:     hc,
		target: strings.TrimRight(target, "/") + "/v1/GetRateLimits",
		before: []byte(`{"requests":[{"name":"loadgen","unique_key":"`),
		after: fmt.Appendf(nil, `","hits":1,"limit":%d,"duration":%d,"burst":%d,"algorithm":"LEAKY_BUCKET"}]}`,
			p.Capacity, durMs, p.Capacity),
	}
}

func (g *gubernatorCaller) call(ctx context.Context, keys []string) (int, error) {
	b := append(append(append(g.buf[:0], g.before...), keys[0]...), g.after...)
	g.buf = b
	var out struct {
		Responses []struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"responses"`
	}
	if err := postJSON(ctx, g.hc, g.target, b, &out); err != nil {
		return 0, err
	}
	if len(out.Responses) != 1 {
		return 0, fmt.Errorf("gubernator answered %d responses for 1 request", len(out.Responses))
	}
	r := out.Responses[0]
	switch {
	case r.Error != "":
		return 0, errors.New("gubernator: " + r.Error)
	case r.Status == "UNDER_LIMIT":
		return 1, nil
	case r.Status == "OVER_LIMIT":
		return 0, nil
	}
	return 0, fmt.Errorf("gubernator: unknown status %q", r.Status)
}

func (g *gubernatorCaller) close() {}

// postJSON posts body and decodes a 200 answer into out.
func postJSON(ctx context.Context, hc *http.Client, target string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}

// tokenBucketLua is the Redis script of redis mode.
//
//go:embed tokenbucket.lua
var tokenBucketLua string

// redisCaller runs the token-bucket script with EVALSHA on its own
// connection, and dials a new one after a failed call (whose reply may be
// half read).
type redisCaller struct {
	target string
	conn   *respConn
	args   [][]byte // EVALSHA sha 1 <key> capacity rate cost; the key is replaced per call
}

func newRedisCaller(target, sha string, p bucket.Policy) (*redisCaller, error) {
	conn, err := dialRESP(target)
	if err != nil {
		return nil, err
	}
	return &redisCaller{target: target, conn: conn, args: [][]byte{
		[]byte("EVALSHA"), []byte(sha), []byte("1"), nil,
		[]byte(strconv.FormatInt(p.Capacity, 10)), []byte(p.RateString()), []byte("1"),
	}}, nil
}

func (r *redisCaller) call(ctx context.Context, keys []string) (int, error) {
	if r.conn == nil {
		conn, err := dialRESP(r.target)
		if err != nil {
			return 0, err
		}
		r.conn = conn
	}
	r.args[3] = []byte(keys[0])
	v, err := r.conn.do(ctx, r.args...)
	if err != nil {
		r.close()
		return 0, err
	}
	// The script answers {allowed (0 or 1), whole tokens left}.
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return 0, fmt.Errorf("redis: unexpected answer %v", v)
	}
	allowed, ok := arr[0].(int64)
	if !ok {
		return 0, fmt.Errorf("redis: unexpected answer %v", v)
	}
	return int(allowed), nil
}

func (r *redisCaller) close() {
	if r.conn != nil {
		r.conn.close()
		r.conn = nil
	}
}

// loadRedisScript loads the token-bucket script into the Redis at target
// and returns its SHA1.
func loadRedisScript(target string) (string, error) {
	conn, err := dialRESP(target)
	if err != nil {
		return "", err
	}
	defer conn.close()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	v, err := conn.do(ctx, []byte("SCRIPT"), []byte("LOAD"), []byte(tokenBucketLua))
	if err != nil {
		return "", fmt.Errorf("redis %s: SCRIPT LOAD: %w", target, err)
	}
	sha, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("redis %s: SCRIPT LOAD answered %v", target, v)
	}
	return sha, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
