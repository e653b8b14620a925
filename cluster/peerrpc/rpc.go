// Package peerrpc is the internal protocol between nodes: its client and
// server plumbing (Client, Call, Handle), its error codes (Error), and its
// wire formats, binary for forwarded decisions (wire.go) and tagged JSON
// for the rest (wire_json.go). What each call does is package cluster's:
// its rpcHandler names the handlers. Forwarded decisions do not use the
// HTTP plumbing: package cluster's forwarder sends them as raftnet calls.
package peerrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/fsm"
)

// LayerName is the raft port's stream the protocol runs on: HTTP/1.1 with
// JSON bodies, carried over the raft port's mux, so nodes need no extra
// port and connections are pooled by net/http. Every handler acts only on
// groups this node serves: anything else answers "not_leader", which the
// caller retries at the leader.
const LayerName = "rpc"

const (
	codeInternal = "internal"

	// DeadlineHeader carries the caller's deadline in Unix nanoseconds.
	DeadlineHeader = "X-Quorate-Deadline"
)

// Error is an error as it crosses the wire: its code (see codes) and text.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// others maps the errors a handler may answer that are not the node's
// own (*errs.Error, which carry their wire code) to their codes on the
// wire, and back. They are distinct errors, so no order matters; a node's
// own error wrapped with one of them is answered by the node's (its
// classification comes first). Codes are part of the protocol between
// nodes.
var others = []struct {
	code string
	err  error
}{
	{"unavailable", context.DeadlineExceeded},
	{"unavailable", context.Canceled},
	{"invalid_policy", bucket.ErrInvalidPolicy},
	{"invalid_tier_name", bucket.ErrInvalidTierName},
	{"too_many_tiers", bucket.ErrTooManyTiers},
	{"no_such_tier", fsm.ErrNoSuchTier},
	{"invalid_command", fsm.ErrInvalidCommand},
}

// byWire is every error a wire code stands for on the receiving side.
var byWire = func() map[string]error {
	m := map[string]error{}
	for _, e := range errs.All {
		m[e.Wire()] = e
	}
	for _, o := range others {
		if _, ok := m[o.code]; !ok {
			m[o.code] = o.err
		}
	}
	return m
}()

// ToError is err as a handler answers it: the wire code of its
// classification (errs.Classify), else of the first of others it matches,
// else "internal".
func ToError(err error) *Error {
	if e, ok := errs.Classify(err); ok {
		return &Error{Code: e.Wire(), Message: err.Error()}
	}
	for _, c := range others {
		if errors.Is(err, c.err) {
			return &Error{Code: c.code, Message: err.Error()}
		}
	}
	return &Error{Code: codeInternal, Message: err.Error()}
}

// Err is the error a caller sees for e: the error of its code, wrapped, or
// for a code this node does not know, errs.ErrOutcomeUnknown. A remote
// node that is stopping took nothing: another may lead soon, so it is
// ErrNotLeader here.
func (e *Error) Err() error {
	if e.Code == errs.ErrShuttingDown.Wire() {
		return fmt.Errorf("%w (remote shutting down: %s)", errs.ErrNotLeader, e.Message)
	}
	if err, ok := byWire[e.Code]; ok {
		return fmt.Errorf("%w (remote: %s)", err, e.Message)
	}
	// An error this node cannot classify (a newer peer's, or a bug there)
	// proves nothing about what was done.
	return fmt.Errorf("%w: remote error: %s", errs.ErrOutcomeUnknown, e.Message)
}

// Bodies of the internal calls.
type (
	AllowItem struct {
		Group    int                `json:"group"`
		Requests []fsm.AllowRequest `json:"requests"`
		// Deadline is this item's caller's deadline (Unix ns; 0: none):
		// items of one call may have different deadlines, and none may be
		// proposed after its own.
		Deadline int64 `json:"deadline_unix_nano,omitempty"`
	}
	AllowReq struct {
		Items []AllowItem `json:"items"`
	}
	AllowResult struct {
		Decisions []fsm.Decision `json:"decisions,omitempty"`
		Error     *Error         `json:"error,omitempty"`
	}
	AllowResp struct {
		Items []AllowResult `json:"items"`
	}
	ClientReq struct {
		Client string `json:"client"`
		Tier   string `json:"tier,omitempty"`
		// Actor is who asks for a set-tier or reset, for the audit trail
		// (cluster version 2; older nodes ignore it).
		Actor string `json:"actor,omitempty"`
	}
	// GroupReq names a group ("0".., or "meta").
	GroupReq struct {
		Group string `json:"group"`
	}
	Resp[T any] struct {
		Value T      `json:"value"`
		Error *Error `json:"error,omitempty"`
	}
)

// Handle serves POST path: it decodes an In, calls fn with the caller's
// deadline and answers Resp[Out].
func Handle[In, Out any](mux *http.ServeMux, path string, fn func(context.Context, In) (Out, error)) {
	handle(mux, path, func(ctx context.Context, req In, w http.ResponseWriter) {
		v, err := fn(ctx, req)
		writeRPCResult(w, v, err)
	})
}

// handle serves POST path: it decodes an In and calls answer with the
// caller's deadline.
func handle[In any](mux *http.ServeMux, path string, answer func(context.Context, In, http.ResponseWriter)) {
	mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
		var req In
		ctx, cancel, ok := decodeRPC(w, r, &req)
		if !ok {
			return
		}
		defer cancel()
		answer(ctx, req, w)
	})
}

// MaxBody bounds what an internal call may send or answer.
const MaxBody = 64 << 20

func decodeRPC(w http.ResponseWriter, r *http.Request, v any) (context.Context, context.CancelFunc, bool) {
	if err := json.NewDecoder(io.LimitReader(r.Body, MaxBody)).Decode(v); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, nil, false
	}
	ctx, cancel := CallerContext(r)
	return ctx, cancel, true
}

// CallerContext is r's context with the calling node's caller's deadline.
func CallerContext(r *http.Request) (context.Context, context.CancelFunc) {
	if ns, err := strconv.ParseInt(r.Header.Get(DeadlineHeader), 10, 64); err == nil {
		return context.WithDeadline(r.Context(), time.Unix(0, ns))
	}
	return r.Context(), func() {}
}

func writeRPC(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeRPCResult[T any](w http.ResponseWriter, v T, err error) {
	resp := Resp[T]{Value: v}
	if err != nil {
		resp.Error = ToError(err)
	}
	writeRPC(w, resp)
}

// Client calls other nodes' internal handlers over the mux.
type Client struct {
	HTTP *http.Client
}

// call posts in to path on the node at addr (its raft address) as JSON and
// decodes the answer into out. See Post.
func (c *Client) call(ctx context.Context, addr, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	data, err := c.Post(ctx, addr, path, "application/json", body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: %s%s: reading the answer: %v", errs.ErrOutcomeUnknown, addr, path, err)
	}
	return nil
}

// Post sends body to path on the node at addr and returns the answer's
// body. A failure to reach the node before sending counts as
// errs.ErrNotLeader (nothing happened there); a failure after is
// errs.ErrOutcomeUnknown.
func (c *Client) Post(ctx context.Context, addr, path, contentType string, body []byte) ([]byte, error) {
	resp, err := c.do(ctx, addr, path, contentType, body)
	if err != nil {
		if errors.Is(err, errs.ErrNotLeader) {
			return nil, err
		}
		// Sent, perhaps acted on, and the answer lost.
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %s%s: %w", errs.ErrOutcomeUnknown, addr, path, ctx.Err())
		}
		return nil, fmt.Errorf("%w: %s%s: %v", errs.ErrOutcomeUnknown, addr, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		err := fmt.Errorf("%s%s: HTTP %d: %s", addr, path, resp.StatusCode, bytes.TrimSpace(msg))
		if resp.StatusCode >= 500 {
			return nil, fmt.Errorf("%w: %w", errs.ErrOutcomeUnknown, err)
		}
		return nil, err // refused before anything was done
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return nil, fmt.Errorf("%w: %s%s: reading the answer: %v", errs.ErrOutcomeUnknown, addr, path, err)
	}
	return data, nil
}

// do posts body to path on the node at addr with the caller's deadline in
// DeadlineHeader. Failing to reach the node at all is errs.ErrNotLeader
// (nothing happened there); any other error is the HTTP client's.
func (c *Client) do(ctx context.Context, addr, path, contentType string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	if d, ok := ctx.Deadline(); ok {
		req.Header.Set(DeadlineHeader, strconv.FormatInt(d.UnixNano(), 10))
	}
	resp, err := c.HTTP.Do(req)
	var op *net.OpError
	if err != nil && errors.As(err, &op) && op.Op == "dial" {
		return nil, fmt.Errorf("%w: %s%s: %v", errs.ErrNotLeader, addr, path, err)
	}
	return resp, err
}

// Call posts in to path on the node at addr as JSON, for handlers
// answering Resp[T] (see Handle): the value, or the handler's error as
// Error.Err gives it.
func Call[T any](ctx context.Context, c *Client, addr, path string, in any) (T, error) {
	var out Resp[T]
	if err := c.call(ctx, addr, path, in, &out); err != nil {
		var zero T
		return zero, err
	}
	if out.Error != nil {
		return out.Value, out.Error.Err()
	}
	return out.Value, nil
}
