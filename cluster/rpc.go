package cluster

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
	"github.com/quorate/quorate/fsm"
)

// The internal protocol: HTTP/1.1 with JSON bodies, carried over the raft
// port's mux under the stream name rpcLayer, so nodes need no extra port
// and connections are pooled by net/http. Every handler acts only on
// groups this node serves: anything else answers "not_leader", which the
// caller retries at the leader.
const rpcLayer = "rpc"

// raftLayer is the stream name of every group's raft traffic (raftnet).
const raftLayer = "raft"

const (
	codeInternal = "internal"

	// deadlineHeader carries the caller's deadline in Unix nanoseconds.
	deadlineHeader = "X-Quorate-Deadline"
)

type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// rpcCodes maps the errors a handler may answer to their codes on the
// wire, and back: the first entry whose error matches wins, so more
// specific errors come first. Codes are part of the protocol between nodes.
var rpcCodes = []struct {
	code string
	err  error
}{
	{"not_leader", errNotLeader},
	// A remote node that is stopping took nothing: another may lead soon.
	{"shutting_down", ErrShuttingDown},
	{"outcome_unknown", ErrOutcomeUnknown},
	{"overloaded", ErrOverloaded},
	{"too_many_clients", ErrTooManyClients},
	{"disk_full", ErrDiskFull},
	{"unavailable", ErrUnavailable},
	{"unavailable", context.DeadlineExceeded},
	{"unavailable", context.Canceled},
	{"invalid_policy", bucket.ErrInvalidPolicy},
	{"invalid_tier_name", bucket.ErrInvalidTierName},
	{"too_many_tiers", bucket.ErrTooManyTiers},
	{"no_such_tier", fsm.ErrNoSuchTier},
	{"invalid_command", fsm.ErrInvalidCommand},
}

func toRPCError(err error) *rpcError {
	for _, c := range rpcCodes {
		if errors.Is(err, c.err) {
			return &rpcError{Code: c.code, Message: err.Error()}
		}
	}
	return &rpcError{Code: codeInternal, Message: err.Error()}
}

func (e *rpcError) err() error {
	if e.Code == "shutting_down" {
		return fmt.Errorf("%w (remote shutting down: %s)", errNotLeader, e.Message)
	}
	for _, c := range rpcCodes {
		if c.code == e.Code {
			return fmt.Errorf("%w (remote: %s)", c.err, e.Message)
		}
	}
	// An error this node cannot classify (a newer peer's, or a bug there)
	// proves nothing about what was done.
	return fmt.Errorf("%w: remote error: %s", ErrOutcomeUnknown, e.Message)
}

// Bodies of the internal calls.
type (
	rpcAllowItem struct {
		Group    int                `json:"group"`
		Requests []fsm.AllowRequest `json:"requests"`
		// Deadline is this item's caller's deadline (Unix ns; 0: none):
		// items of one call may have different deadlines, and none may be
		// proposed after its own.
		Deadline int64 `json:"deadline_unix_nano,omitempty"`
	}
	rpcAllowReq struct {
		Items []rpcAllowItem `json:"items"`
	}
	rpcAllowResult struct {
		Decisions []fsm.Decision `json:"decisions,omitempty"`
		Error     *rpcError      `json:"error,omitempty"`
	}
	rpcAllowResp struct {
		Items []rpcAllowResult `json:"items"`
	}
	rpcClientReq struct {
		Client string `json:"client"`
		Tier   string `json:"tier,omitempty"`
	}
	rpcResp[T any] struct {
		Value T         `json:"value"`
		Error *rpcError `json:"error,omitempty"`
	}
)

// rpcHandler returns the internal protocol's handler.
func (n *Node) rpcHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /internal/allow", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRPCBody))
		var req rpcAllowReq
		if err == nil {
			req, err = decodeAllowReq(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx, cancel := callerContext(r)
		defer cancel()
		w.Header().Set("Content-Type", allowContentType)
		_, _ = w.Write(appendAllowResp(nil, n.allowLocalItems(ctx, req.Items)))
	})
	handleRPC(mux, "/internal/client", func(ctx context.Context, req rpcClientReq) (wireClientView, error) {
		v, err := n.clientLocal(ctx, n.groupFor(req.Client), req.Client)
		return toWireClientView(v), err
	})
	handleRPC(mux, "/internal/set-tier", func(ctx context.Context, req rpcClientReq) (struct{}, error) {
		_, err := n.groupFor(req.Client).applyLocal(ctx, fsm.SetTier{Client: req.Client, Tier: req.Tier})
		return struct{}{}, err
	})
	handleRPC(mux, "/internal/config-op", func(ctx context.Context, w wireConfigOp) (ConfigChange, error) {
		op, err := w.op()
		if err != nil {
			return ConfigChange{}, err
		}
		return n.changeConfigLocal(ctx, op)
	})
	handleRPC(mux, "/internal/config", func(ctx context.Context, _ struct{}) (wireConfig, error) {
		if err := n.meta.verifyRead(ctx); err != nil {
			return wireConfig{}, err
		}
		return toWireConfig(n.meta.fsm.Config()), nil
	})
	// A hint from the meta leader that a new configuration is committed:
	// reconcile now rather than at the next tick. The body says nothing (a
	// configuration from older nodes, ignored): see configHint.
	handleRPC(mux, "/internal/install-config", func(_ context.Context, _ struct{}) (struct{}, error) {
		n.configHint()
		return struct{}{}, nil
	})
	handleRPC(mux, "/internal/whoami", n.whoami) // see peers.go
	handleRPC(mux, "/internal/time", func(context.Context, struct{}) (int64, error) {
		return n.opts.Clock.Now().UnixNano(), nil // the clock this node stamps with
	})
	handleRPC(mux, "/internal/groups", func(context.Context, struct{}) ([]GroupStatus, error) {
		return n.localGroupStatus(), nil
	})
	return mux
}

// handleRPC serves POST path: it decodes a Req, calls fn with the caller's
// deadline and answers rpcResp[Resp].
func handleRPC[Req, Resp any](mux *http.ServeMux, path string, fn func(context.Context, Req) (Resp, error)) {
	mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
		var req Req
		ctx, cancel, ok := decodeRPC(w, r, &req)
		if !ok {
			return
		}
		defer cancel()
		v, err := fn(ctx, req)
		writeRPCResult(w, v, err)
	})
}

// maxRPCBody bounds what an internal call may send or answer.
const maxRPCBody = 64 << 20

func decodeRPC(w http.ResponseWriter, r *http.Request, v any) (context.Context, context.CancelFunc, bool) {
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRPCBody)).Decode(v); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, nil, false
	}
	ctx, cancel := callerContext(r)
	return ctx, cancel, true
}

// callerContext is r's context with the calling node's caller's deadline.
func callerContext(r *http.Request) (context.Context, context.CancelFunc) {
	if ns, err := strconv.ParseInt(r.Header.Get(deadlineHeader), 10, 64); err == nil {
		return context.WithDeadline(r.Context(), time.Unix(0, ns))
	}
	return r.Context(), func() {}
}

func writeRPC(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeRPCResult[T any](w http.ResponseWriter, v T, err error) {
	resp := rpcResp[T]{Value: v}
	if err != nil {
		resp.Error = toRPCError(err)
	}
	writeRPC(w, resp)
}

// rpcClient calls other nodes' internal handlers over the mux.
type rpcClient struct {
	hc *http.Client
}

// call posts in to path on the node at addr (its raft address) as JSON and
// decodes the answer into out. See post.
func (c *rpcClient) call(ctx context.Context, addr, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	data, err := c.post(ctx, addr, path, "application/json", body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: %s%s: reading the answer: %v", ErrOutcomeUnknown, addr, path, err)
	}
	return nil
}

// post sends body to path on the node at addr and returns the answer's
// body. A failure to reach the node before sending counts as errNotLeader
// (nothing happened there); a failure after is ErrOutcomeUnknown.
func (c *rpcClient) post(ctx context.Context, addr, path, contentType string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	if d, ok := ctx.Deadline(); ok {
		req.Header.Set(deadlineHeader, strconv.FormatInt(d.UnixNano(), 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// Never reached the node: nothing happened there.
			return nil, fmt.Errorf("%w: %s%s: %v", errNotLeader, addr, path, err)
		}
		// Sent, perhaps acted on, and the answer lost.
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %s%s: %w", ErrOutcomeUnknown, addr, path, ctx.Err())
		}
		return nil, fmt.Errorf("%w: %s%s: %v", ErrOutcomeUnknown, addr, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		err := fmt.Errorf("%s%s: HTTP %d: %s", addr, path, resp.StatusCode, bytes.TrimSpace(msg))
		if resp.StatusCode >= 500 {
			return nil, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		}
		return nil, err // refused before anything was done
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxRPCBody))
	if err != nil {
		return nil, fmt.Errorf("%w: %s%s: reading the answer: %v", ErrOutcomeUnknown, addr, path, err)
	}
	return data, nil
}

// callResult is call for handlers answering rpcResp.
func callResult[T any](ctx context.Context, c *rpcClient, addr, path string, in any) (T, error) {
	var out rpcResp[T]
	if err := c.call(ctx, addr, path, in, &out); err != nil {
		var zero T
		return zero, err
	}
	if out.Error != nil {
		return out.Value, out.Error.err()
	}
	return out.Value, nil
}
