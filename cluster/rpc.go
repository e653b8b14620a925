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
// groups this node serves: anything else answers codeNotLeader, which the
// caller retries at the leader.
const rpcLayer = "rpc"

const (
	codeNotLeader    = "not_leader"
	codeUnavailable  = "unavailable"
	codeShuttingDown = "shutting_down"
	codeInvalid      = "invalid_policy"
	codeTierName     = "invalid_tier_name"
	codeNoSuchTier   = "no_such_tier"
	codeInvalidCmd   = "invalid_command"
	codeInternal     = "internal"

	// deadlineHeader carries the caller's deadline in Unix nanoseconds.
	deadlineHeader = "X-Quorate-Deadline"
)

type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func toRPCError(err error) *rpcError {
	code := codeInternal
	switch {
	case errors.Is(err, errNotLeader):
		code = codeNotLeader
	case errors.Is(err, ErrShuttingDown):
		code = codeShuttingDown
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		code = codeUnavailable
	case errors.Is(err, bucket.ErrInvalidPolicy):
		code = codeInvalid
	case errors.Is(err, bucket.ErrInvalidTierName):
		code = codeTierName
	case errors.Is(err, fsm.ErrNoSuchTier):
		code = codeNoSuchTier
	case errors.Is(err, fsm.ErrInvalidCommand):
		code = codeInvalidCmd
	}
	return &rpcError{Code: code, Message: err.Error()}
}

func (e *rpcError) err() error {
	switch e.Code {
	case codeNotLeader:
		return fmt.Errorf("%w (remote: %s)", errNotLeader, e.Message)
	case codeShuttingDown:
		// The remote node is stopping; another may lead soon.
		return fmt.Errorf("%w (remote shutting down: %s)", errNotLeader, e.Message)
	case codeUnavailable:
		return fmt.Errorf("%w (remote: %s)", ErrUnavailable, e.Message)
	case codeInvalid:
		return fmt.Errorf("%w (remote: %s)", bucket.ErrInvalidPolicy, e.Message)
	case codeTierName:
		return fmt.Errorf("%w (remote: %s)", bucket.ErrInvalidTierName, e.Message)
	case codeNoSuchTier:
		return fmt.Errorf("%w (remote: %s)", fsm.ErrNoSuchTier, e.Message)
	case codeInvalidCmd:
		return fmt.Errorf("%w (remote: %s)", fsm.ErrInvalidCommand, e.Message)
	}
	return fmt.Errorf("remote error: %s", e.Message)
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
		var req rpcAllowReq
		ctx, cancel, ok := decodeRPC(w, r, &req)
		if !ok {
			return
		}
		defer cancel()
		writeRPC(w, n.allowLocalItems(ctx, req.Items))
	})
	handleRPC(mux, "/internal/client", func(ctx context.Context, req rpcClientReq) (fsm.ClientView, error) {
		return n.clientLocal(ctx, n.groupFor(req.Client), req.Client)
	})
	handleRPC(mux, "/internal/set-tier", func(ctx context.Context, req rpcClientReq) (struct{}, error) {
		_, err := n.groupFor(req.Client).applyLocal(ctx, fsm.SetTier{Client: req.Client, Tier: req.Tier})
		return struct{}{}, err
	})
	handleRPC(mux, "/internal/config-op", n.changeConfigLocal)
	handleRPC(mux, "/internal/config", func(ctx context.Context, _ struct{}) (bucket.Config, error) {
		if err := n.meta.verifyRead(ctx); err != nil {
			return bucket.Config{}, err
		}
		return n.meta.fsm.Config(), nil
	})
	// A hint from the meta leader that a new configuration is committed:
	// reconcile now rather than at the next tick. The body (the pushed
	// configuration, sent by older nodes) is ignored: see configHint.
	handleRPC(mux, "/internal/install-config", func(_ context.Context, _ bucket.Config) (struct{}, error) {
		n.configHint()
		return struct{}{}, nil
	})
	handleRPC(mux, "/internal/whoami", n.whoami) // see peers.go
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

func decodeRPC(w http.ResponseWriter, r *http.Request, v any) (context.Context, context.CancelFunc, bool) {
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(v); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, nil, false
	}
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if ns, err := strconv.ParseInt(r.Header.Get(deadlineHeader), 10, 64); err == nil {
		ctx, cancel = context.WithDeadline(ctx, time.Unix(0, ns))
	}
	return ctx, cancel, true
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

// call posts in to path on the node at addr (its raft address) and decodes
// the answer into out. A failure to reach the node before sending counts
// as errNotLeader (nothing happened there); a failure after is ambiguous.
func (c *rpcClient) call(ctx context.Context, addr, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if d, ok := ctx.Deadline(); ok {
		req.Header.Set(deadlineHeader, strconv.FormatInt(d.UnixNano(), 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// Never reached the node: nothing happened there.
			return fmt.Errorf("%w: %s%s: %v", errNotLeader, addr, path, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s%s: %w", ErrUnavailable, addr, path, ctx.Err())
		}
		return fmt.Errorf("%w: %s%s: %v", ErrUnavailable, addr, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s%s: HTTP %d: %s", addr, path, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return json.NewDecoder(resp.Body).Decode(out)
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
