package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/api"
)

// maxAnswer bounds an answer's body: a batch of 1,000 decisions is about
// 200 KB.
const maxAnswer = 4 << 20

// allowOne sends req alone as POST /v1/allow, with until as the node's deadline.
func (c *Client) allowOne(ctx context.Context, node string, req api.AllowRequest, until time.Time) (api.AllowResponse, *Error) {
	var out allowAnswer
	err := c.call(ctx, node, http.MethodPost, "/v1/allow", allowBody{&req}, &out, until)
	return out.AllowResponse, err
}

// allowBatch sends reqs as one POST /v1/allow/batch.
func (c *Client) allowBatch(ctx context.Context, node string, reqs []api.AllowRequest, until time.Time) ([]api.AllowResponse, *Error) {
	var out batchAnswer
	if err := c.call(ctx, node, http.MethodPost, "/v1/allow/batch", batchBody(reqs), &out, until); err != nil {
		return nil, err
	}
	if len(out.Results) != len(reqs) {
		return nil, lost(node, fmt.Errorf("a batch of %d answered with %d results", len(reqs), len(out.Results)))
	}
	return out.Results, nil
}

// A carrier takes a request to its node and returns the answer, as
// http.Client.Do does.
type carrier func(*http.Request) (*http.Response, error)

// carrierOf is hc.Do, or, where hc adds nothing a call needs (no cookie
// jar, timeout or redirect policy of its own), its transport's RoundTrip.
// Do keeps a copy of every request's headers in case a redirect must be
// followed (7% of the client's CPU per coalesced decision), and quorate
// never redirects: a 3xx answer is an error either way.
func carrierOf(hc *http.Client) carrier {
	if hc.Jar != nil || hc.Timeout != 0 || hc.CheckRedirect != nil {
		return hc.Do
	}
	if hc.Transport == nil {
		return http.DefaultTransport.RoundTrip
	}
	return hc.Transport.RoundTrip
}

// call is send through the client's connections and token, and tells the
// routes table the routes version the node answered with.
func (c *Client) call(ctx context.Context, node, method, path string, in, out any, until time.Time) *Error {
	v, err := send(ctx, c.do, c.auth, node, method, path, in, out, until)
	if v != 0 {
		c.routesSeen(node, v)
	}
	return err
}

// send sends in (if not nil) as JSON to node through do and decodes a 2xx
// answer into out (if not nil), each by hand where it is a wireEncoder or
// wireDecoder, with auth as the Authorization header ("" for none).
// until (if not zero) bounds the call and is sent as the node's own
// deadline; without it, the context's deadline is sent. A failure is an
// *Error of the kind the evidence allows: not sent when no connection was
// made, lost when the request may have reached the node, the code's kind
// for an error answer. routesVersion is the answer's
// X-Quorate-Routes-Version (0: none).
func send(ctx context.Context, do carrier, auth, node, method, path string, in, out any, until time.Time) (routesVersion uint64, _ *Error) {
	var body io.Reader
	if in != nil {
		var b []byte
		if e, ok := in.(wireEncoder); ok {
			b = e.appendJSON(make([]byte, 0, e.sizeHint()))
		} else {
			var err error
			if b, err = json.Marshal(in); err != nil {
				return 0, invalid("encoding the request: %v", err)
			}
		}
		body = bytes.NewReader(b)
	}
	if !until.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, until)
		defer cancel()
	}
	var connected atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }})
	req, err := http.NewRequestWithContext(ctx, method, node+path, body)
	if err != nil {
		return 0, invalid("%v", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if dl, ok := ctx.Deadline(); ok {
		ms := time.Until(dl).Milliseconds()
		if ms <= 0 {
			return 0, notSent(node, context.DeadlineExceeded)
		}
		req.Header.Set(api.HeaderTimeout, strconv.FormatInt(ms, 10))
	}
	resp, err := do(req)
	if err != nil {
		if !connected.Load() {
			return 0, notSent(node, err)
		}
		return 0, lost(node, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return 0, &Error{Status: resp.StatusCode, Node: node, Err: err, kind: kindOfStatus(resp.StatusCode)}
		}
		return 0, lost(node, fmt.Errorf("reading the answer: %w", err))
	}
	routesVersion, _ = strconv.ParseUint(resp.Header.Get(api.HeaderRoutesVersion), 10, 64)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return routesVersion, answerError(node, resp, data)
	}
	if out == nil {
		return routesVersion, nil
	}
	decode := json.Unmarshal
	if d, ok := out.(wireDecoder); ok {
		decode = func(data []byte, _ any) error { return d.decodeJSON(data) }
	}
	if err := decode(data, out); err != nil {
		return routesVersion, lost(node, fmt.Errorf("decoding the answer to %s %s: %w", method, path, err))
	}
	return routesVersion, nil
}
