package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
)

// Node is a typed client of one node's v1 API, with no routing and no
// retries: for the CLI, operators' scripts and tools that must talk to a
// given node (a failover timer, a test). A service deciding requests wants
// Client instead. It is safe for concurrent use.
//
// Every call's error is an *Error (or nil). When ctx has a deadline, each
// call sends it as api.HeaderTimeout so the node gives up (503 timeout) no
// later than the caller does.
type Node struct {
	base string
	hc   *http.Client
	auth string // the Authorization header's value, "" for none
}

// NodeOption configures a Node (NewNode).
type NodeOption func(*Node)

// WithToken makes the Node send token as "Authorization: Bearer <token>"
// on every call. An empty token sends nothing.
func WithToken(token string) NodeOption {
	return func(n *Node) {
		if token != "" {
			n.auth = "Bearer " + token
		}
	}
}

// NewNode returns a Node for the node at baseURL ("http://host:port"; a
// bare "host:port" gets "http://"). A nil hc means http.DefaultClient.
func NewNode(baseURL string, hc *http.Client, opts ...NodeOption) *Node {
	if hc == nil {
		hc = http.DefaultClient
	}
	n := &Node{base: normalURL(baseURL), hc: hc}
	for _, o := range opts {
		o(n)
	}
	return n
}

// URL is the node's base URL.
func (n *Node) URL() string { return n.base }

// Allow asks for cost tokens (0 peeks) for client; a non-empty requestID
// makes a retry idempotent. A denial is not an error: see
// api.AllowResponse.Allowed.
func (n *Node) Allow(ctx context.Context, client string, cost int64, requestID string) (api.AllowResponse, error) {
	var out api.AllowResponse
	err := n.do(ctx, http.MethodPost, "/v1/allow", api.AllowRequest{Client: client, Cost: &cost, RequestID: requestID}, &out)
	return out, err
}

// AllowBatch decides reqs in one call and returns one result per request,
// in order. A request with a nil Cost costs 1.
func (n *Node) AllowBatch(ctx context.Context, reqs []api.AllowRequest) ([]api.AllowResponse, error) {
	var out api.BatchResponse
	if err := n.do(ctx, http.MethodPost, "/v1/allow/batch", api.BatchRequest{Requests: reqs}, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// GetClient returns client's tier, policy and balance without consuming.
func (n *Node) GetClient(ctx context.Context, client string) (api.ClientResponse, error) {
	var out api.ClientResponse
	err := n.do(ctx, http.MethodGet, "/v1/clients/"+pathSegment(client), nil, &out)
	return out, err
}

// SetClientTier assigns client to tier.
func (n *Node) SetClientTier(ctx context.Context, client, tier string) error {
	return n.do(ctx, http.MethodPut, "/v1/clients/"+pathSegment(client)+"/tier", api.SetTierRequest{Tier: tier}, nil)
}

// RemoveClientTier removes client's tier assignment; the client falls back
// to the default policy.
func (n *Node) RemoveClientTier(ctx context.Context, client string) error {
	return n.do(ctx, http.MethodDelete, "/v1/clients/"+pathSegment(client)+"/tier", nil, nil)
}

// ResetClient forgets client's bucket, so that its next decision finds it
// full; its tier assignment stays. Before every node runs a release with
// resets the answer is an *Error with Code api.CodeClusterVersion.
func (n *Node) ResetClient(ctx context.Context, client string) (api.ResetResponse, error) {
	var out api.ResetResponse
	err := n.do(ctx, http.MethodPost, "/v1/clients/"+pathSegment(client)+"/reset", nil, &out)
	return out, err
}

// PutTier creates or changes tier; with bucket.Fill, a change that raises
// its capacity (or limit) refills its clients once. The change is applied
// everywhere unless the result lists lagging groups (the server answered
// 202).
func (n *Node) PutTier(ctx context.Context, tier string, p bucket.Policy, onRaise bucket.OnRaise) (api.ConfigChange, error) {
	var out api.ConfigChange
	err := n.do(ctx, http.MethodPut, "/v1/tiers/"+pathSegment(tier), policyChange(p, onRaise), &out)
	return out, err
}

// policyChange is the body of a PUT of a policy.
func policyChange(p bucket.Policy, onRaise bucket.OnRaise) api.PolicyChange {
	c := api.PolicyChange{Policy: api.PolicyToJSON(p)}
	if onRaise == bucket.Fill {
		c.OnRaise = onRaise.String()
	}
	return c
}

// DeleteTier removes tier; a missing tier is an *Error with Code
// api.CodeTierNotFound.
func (n *Node) DeleteTier(ctx context.Context, tier string) (api.ConfigChange, error) {
	var out api.ConfigChange
	err := n.do(ctx, http.MethodDelete, "/v1/tiers/"+pathSegment(tier), nil, &out)
	return out, err
}

// Tiers returns the default policy, the tiers and the configuration version.
func (n *Node) Tiers(ctx context.Context) (api.TiersResponse, error) {
	var out api.TiersResponse
	err := n.do(ctx, http.MethodGet, "/v1/tiers", nil, &out)
	return out, err
}

// Audit returns the configuration changes after version since, oldest
// first, at most limit of them (1..1000; 0 asks for the server's default,
// 100). A cluster below version 2, which records nothing, answers an
// *Error with Code api.CodeClusterVersion.
func (n *Node) Audit(ctx context.Context, since uint64, limit int) (api.AuditResponse, error) {
	q := url.Values{}
	if since > 0 {
		q.Set("since", strconv.FormatUint(since, 10))
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/audit"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.AuditResponse
	err := n.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// PutDefault sets the global default policy, filling on a raise as PutTier
// does.
func (n *Node) PutDefault(ctx context.Context, p bucket.Policy, onRaise bucket.OnRaise) (api.ConfigChange, error) {
	var out api.ConfigChange
	err := n.do(ctx, http.MethodPut, "/v1/default", policyChange(p, onRaise), &out)
	return out, err
}

// Cluster returns the node's view of the cluster.
func (n *Node) Cluster(ctx context.Context) (api.ClusterStatus, error) {
	var out api.ClusterStatus
	err := n.do(ctx, http.MethodGet, "/v1/cluster", nil, &out)
	return out, err
}

// Routes returns where the node sees each group's leader.
func (n *Node) Routes(ctx context.Context) (api.RoutesResponse, error) {
	var out api.RoutesResponse
	err := n.do(ctx, http.MethodGet, "/v1/routes", nil, &out)
	return out, err
}

// Ready returns nil if the node is ready (every group has a leader), else
// an *Error.
func (n *Node) Ready(ctx context.Context) error {
	return n.do(ctx, http.MethodGet, "/readyz", nil, nil)
}

// Leave asks the node to leave its cluster gracefully and stop.
func (n *Node) Leave(ctx context.Context) error {
	return n.do(ctx, http.MethodPost, "/v1/leave", nil, nil)
}

// Backup writes a backup of the whole cluster (GET /v1/backup, admin) to
// w as the node streams it, and fails if the node stopped part-way. It does
// not check the bytes: `quorate backup` and `quorate restore` do, with
// package cluster/backup, before they trust a file.
func (n *Node) Backup(ctx context.Context, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.base+"/v1/backup", nil)
	if err != nil {
		return invalid("%v", err)
	}
	req.Header.Set("Accept", api.ContentTypeBackup)
	if n.auth != "" {
		req.Header.Set("Authorization", n.auth)
	}
	resp, err := n.hc.Do(req)
	if err != nil {
		return notSent(n.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		return answerError(n.base, resp, data)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return lost(n.base, fmt.Errorf("reading the backup: %w", err))
	}
	if msg := resp.Trailer.Get(api.HeaderBackupError); msg != "" {
		return lost(n.base, fmt.Errorf("the node stopped the backup part-way: %s", msg))
	}
	return nil
}

func (n *Node) do(ctx context.Context, method, path string, in, out any) error {
	if _, err := send(ctx, n.hc.Do, n.auth, n.base, method, path, in, out, time.Time{}); err != nil {
		return err
	}
	return nil
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

// BearerTransport wraps next so that every request through it carries
// token as "Authorization: Bearer <token>" (nothing when token is empty),
// for callers that use their own http.Client, such as load generators.
func BearerTransport(next http.RoundTripper, token string) http.RoundTripper {
	if token == "" {
		return next
	}
	return bearer{next: next, value: "Bearer " + token}
}

type bearer struct {
	next  http.RoundTripper
	value string
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	req.Header.Set("Authorization", b.value)
	return b.next.RoundTrip(req)
}
