package cluster

import (
	"context"

	"github.com/quorate/quorate/cluster/forward"
	"github.com/quorate/quorate/fsm"
)

// forward is the forwarders' Call (package forward): one raftnet call on
// the shared connection to the leader (forward.OverNet).
func (n *Node) forward(ctx context.Context, addr string, body []byte) ([]byte, error) {
	return forward.OverNet(ctx, n.net, addr, body, n.reach.Contact)
}

// serveForwarded is the leader's side of forward (forward.Serve): each item
// goes to its group's batcher, and decisions carry their rate from cluster
// version 2.
func (n *Node) serveForwarded(ctx context.Context, body []byte) ([]byte, error) {
	submit := func(ctx context.Context, group int, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
		return n.groups[group].Batch.Submit(ctx, reqs)
	}
	return forward.Serve(ctx, body, len(n.groups), submit,
		func() bool { return n.ClusterVersion() >= fsm.ClusterVersionOriginsAlways })
}
