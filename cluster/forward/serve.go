package forward

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/grouphash"
	"github.com/quorate/quorate/transport/raftnet"
)

// Method is the raftnet method forwarded decisions are sent to.
const Method = "allow"

// OverNet is the node's Call: one raftnet call on the shared connection to
// the leader, never an HTTP request. contact is told of every answer (the
// reach tracker's evidence).
func OverNet(ctx context.Context, net *raftnet.Net, addr string, body []byte, contact func(addr string)) ([]byte, error) {
	out, err := net.Call(ctx, addr, Method, body)
	var remote *raftnet.RemoteError
	switch {
	case err == nil:
		contact(addr)
		return out, nil
	case errors.Is(err, raftnet.ErrNotSent):
		return nil, fmt.Errorf("%w: forward to %s: %w", errs.ErrNotLeader, addr, err)
	case errors.As(err, &remote):
		// The leader refused the request whole (it did not decode):
		// nothing was decided.
		return nil, fmt.Errorf("forward to %s: refused: %w", addr, err)
	}
	return nil, fmt.Errorf("%w: forward to %s: %w", errs.ErrOutcomeUnknown, addr, err)
}

// Submit hands requests of data group group to its batcher on this node.
type Submit func(ctx context.Context, group int, reqs []fsm.AllowRequest) ([]fsm.Decision, error)

// Serve is the leader's side of OverNet, for a node of groups data groups.
// Decisions carry their policy's rate only once withRate says every member
// reads it (the cluster version): a node of the release before cannot
// decode the answer otherwise.
func Serve(ctx context.Context, body []byte, groups int, submit Submit, withRate func() bool) ([]byte, error) {
	req, err := peerrpc.DecodeAllowReq(body)
	if err != nil {
		return nil, err
	}
	resp := serveItems(ctx, req.Items, groups, submit)
	return peerrpc.AppendAllowResp(nil, resp, withRate()), nil
}

// checkItem refuses a forwarded item that names no group of this cluster,
// carries a request for a client of another group or breaks the allow
// command's rules (fsm.Validate): a peer's request is checked here, where
// it enters this node, as a caller's is by the HTTP and gRPC decoders (see
// raftgroup.Batcher.Start).
func checkItem(it peerrpc.AllowItem, groups int) error {
	if it.Group < 0 || it.Group >= groups {
		return fmt.Errorf("%w: no group %d", fsm.ErrInvalidCommand, it.Group)
	}
	if err := fsm.Validate(fsm.Allow{Requests: it.Requests}); err != nil {
		return err
	}
	for _, r := range it.Requests {
		if g := grouphash.Of(r.Client, groups); g != it.Group {
			return fmt.Errorf("%w: client %q belongs to group %d, not %d", fsm.ErrInvalidCommand, r.Client, g, it.Group)
		}
	}
	return nil
}

// serveItems decides forwarded requests in groups this node serves.
func serveItems(ctx context.Context, items []peerrpc.AllowItem, groups int, submit Submit) peerrpc.AllowResp {
	resp := peerrpc.AllowResp{Items: make([]peerrpc.AllowResult, len(items))}
	var wg sync.WaitGroup
	for i, it := range items {
		if err := checkItem(it, groups); err != nil {
			resp.Items[i].Error = peerrpc.ToError(err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := ctx
			if it.Deadline != 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, time.Unix(0, it.Deadline))
				defer cancel()
			}
			ds, err := submit(ctx, it.Group, it.Requests)
			if err != nil {
				resp.Items[i].Error = peerrpc.ToError(err)
				return
			}
			resp.Items[i].Decisions = ds
		}()
	}
	wg.Wait()
	return resp
}
