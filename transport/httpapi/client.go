package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
)

// APIError is an error answer from the server.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the stable error code, or "" if the answer was not a
	// quorate error body (a proxy's error page, say).
	Code api.Code
	// Message is the human-readable message, or the start of a non-JSON body.
	Message string
	// RetryAfter is the server's Retry-After, 0 if it sent none.
	RetryAfter time.Duration
}

// Kind is what the caller may do: the code's kind (api.KindOf), or Unknown
// for an answer without a code, since a proxy's error page says nothing of
// whether the request was decided.
func (e *APIError) Kind() api.Kind {
	if e.Code != "" {
		return api.KindOf(e.Code)
	}
	return api.Unknown
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("quorate: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("quorate: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// Client is a typed client of the v1 API. It is safe for concurrent use.
//
// When ctx has a deadline, each call sends it as api.HeaderTimeout so the
// server gives up (503 timeout) no later than the caller does.
type Client struct {
	base string
	hc   *http.Client
	// auth is the Authorization header's value, "" for none (WithToken).
	auth string
}

// NewClient returns a Client for the node at baseURL ("http://host:port";
// a bare "host:port" gets "http://"). A nil hc means http.DefaultClient.
// opts add what every call sends, such as WithToken.
func NewClient(baseURL string, hc *http.Client, opts ...ClientOption) *Client {
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: hc}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Allow asks for cost tokens (0 peeks) for client; a non-empty requestID
// makes a retry idempotent. A denial is not an error: see
// api.AllowResponse.Allowed.
func (c *Client) Allow(ctx context.Context, client string, cost int64, requestID string) (api.AllowResponse, error) {
	var out api.AllowResponse
	err := c.do(ctx, http.MethodPost, "/v1/allow", api.AllowRequest{Client: client, Cost: &cost, RequestID: requestID}, &out)
	return out, err
}

// AllowBatch decides reqs in one call and returns one result per request,
// in order. A request with a nil Cost costs 1.
func (c *Client) AllowBatch(ctx context.Context, reqs []api.AllowRequest) ([]api.AllowResponse, error) {
	var out api.BatchResponse
	if err := c.do(ctx, http.MethodPost, "/v1/allow/batch", api.BatchRequest{Requests: reqs}, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// GetClient returns client's tier, policy and balance without consuming.
func (c *Client) GetClient(ctx context.Context, client string) (api.ClientResponse, error) {
	var out api.ClientResponse
	err := c.do(ctx, http.MethodGet, "/v1/clients/"+pathSegment(client), nil, &out)
	return out, err
}

// SetClientTier assigns client to tier.
func (c *Client) SetClientTier(ctx context.Context, client, tier string) error {
	return c.do(ctx, http.MethodPut, "/v1/clients/"+pathSegment(client)+"/tier", api.SetTierRequest{Tier: tier}, nil)
}

// RemoveClientTier removes client's tier assignment; the client falls back
// to the default policy.
func (c *Client) RemoveClientTier(ctx context.Context, client string) error {
	return c.do(ctx, http.MethodDelete, "/v1/clients/"+pathSegment(client)+"/tier", nil, nil)
}

// PutTier creates or changes tier. The change is applied everywhere unless
// the result lists lagging groups (the server answered 202).
func (c *Client) PutTier(ctx context.Context, tier string, p bucket.Policy) (api.ConfigChange, error) {
	var out api.ConfigChange
	err := c.do(ctx, http.MethodPut, "/v1/tiers/"+pathSegment(tier), api.PolicyToJSON(p), &out)
	return out, err
}

// DeleteTier removes tier; a missing tier is an *APIError with Code
// api.CodeTierNotFound.
func (c *Client) DeleteTier(ctx context.Context, tier string) (api.ConfigChange, error) {
	var out api.ConfigChange
	err := c.do(ctx, http.MethodDelete, "/v1/tiers/"+pathSegment(tier), nil, &out)
	return out, err
}

// Tiers returns the default policy, the tiers and the configuration version.
func (c *Client) Tiers(ctx context.Context) (api.TiersResponse, error) {
	var out api.TiersResponse
	err := c.do(ctx, http.MethodGet, "/v1/tiers", nil, &out)
	return out, err
}

// PutDefault sets the global default policy.
func (c *Client) PutDefault(ctx context.Context, p bucket.Policy) (api.ConfigChange, error) {
	var out api.ConfigChange
	err := c.do(ctx, http.MethodPut, "/v1/default", api.PolicyToJSON(p), &out)
	return out, err
}

// Cluster returns the node's view of the cluster.
func (c *Client) Cluster(ctx context.Context) (api.ClusterStatus, error) {
	var out api.ClusterStatus
	err := c.do(ctx, http.MethodGet, "/v1/cluster", nil, &out)
	return out, err
}

// Ready returns nil if the node is ready (every group has a leader), else
// an *APIError (or a transport error).
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil)
}

// Leave asks the node to leave its cluster gracefully and stop.
func (c *Client) Leave(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/leave", nil, nil)
}

// do sends in (if not nil) as JSON and decodes a 2xx answer into out (if
// not nil); any other status becomes an *APIError.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("quorate: encoding request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("quorate: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	if dl, ok := ctx.Deadline(); ok {
		if ms := time.Until(dl).Milliseconds(); ms > 0 {
			req.Header.Set(api.HeaderTimeout, strconv.FormatInt(ms, 10))
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("quorate: reading answer to %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return apiErrorFrom(resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("quorate: decoding answer to %s %s: %w", method, path, err)
	}
	return nil
}

func apiErrorFrom(resp *http.Response, data []byte) *APIError {
	e := &APIError{Status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	var eb api.ErrorBody
	if err := json.Unmarshal(data, &eb); err == nil && eb.Error.Code != "" {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
		return e
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e.Message = msg
	return e
}

// pathSegment escapes s as one path segment, including "." and "..", which
// the server would otherwise clean away.
func pathSegment(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}
