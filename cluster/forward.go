package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/transport/raftnet"
)

// allowMethod is the raftnet method forwarded decisions are sent to.
const allowMethod = "allow"

// forward is the forwarders' Call (package forward): one raftnet call on the shared
// connection to the leader, never an HTTP request.
func (n *Node) forward(ctx context.Context, addr string, body []byte) ([]byte, error) {
	out, err := n.net.Call(ctx, addr, allowMethod, body)
	var remote *raftnet.RemoteError
	switch {
	case err == nil:
		n.reach.Contact(addr)
		return out, nil
	case errors.Is(err, raftnet.ErrNotSent):
		return nil, fmt.Errorf("%w: forward to %s: %w", errNotLeader, addr, err)
	case errors.As(err, &remote):
		// The leader refused the request whole (it did not decode):
		// nothing was decided.
		return nil, fmt.Errorf("forward to %s: refused: %w", addr, err)
	}
	return nil, fmt.Errorf("%w: forward to %s: %w", ErrOutcomeUnknown, addr, err)
}

// serveForwarded is the leader's side of forward. Decisions carry their
// policy's rate only once the cluster version says every member reads it:
// a node of the release before cannot decode the answer otherwise.
func (n *Node) serveForwarded(ctx context.Context, body []byte) ([]byte, error) {
	req, err := peerrpc.DecodeAllowReq(body)
	if err != nil {
		return nil, err
	}
	resp := n.allowLocalItems(ctx, req.Items)
	return peerrpc.AppendAllowResp(nil, resp, n.ClusterVersion() >= fsm.ClusterVersionOriginsAlways), nil
}
