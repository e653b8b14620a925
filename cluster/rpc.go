package cluster

import (
	"context"
	"net/http"

	"github.com/quorate/quorate/cluster/clientops"
	"github.com/quorate/quorate/cluster/origin"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/status"
)

// rpcHandler returns the internal protocol's handler.
func (n *Node) rpcHandler() http.Handler {
	mux := http.NewServeMux()
	clientops.Handle(mux, n.groupFor, n.opts.Clock)
	n.configs.Handle(mux)
	peerrpc.Handle(mux, "/internal/epoch", func(ctx context.Context, _ struct{}) (uint32, error) {
		return origin.ServeEpoch(ctx, n.meta)
	})
	peerrpc.HandleStream(mux, "/internal/snapshot", n.serveSnapshot)
	peerrpc.Handle(mux, "/internal/whoami", n.whoami) // see peers.go
	peerrpc.Handle(mux, "/internal/time", func(context.Context, struct{}) (int64, error) {
		return n.opts.Clock.Now().UnixNano(), nil // the clock this node stamps with
	})
	peerrpc.Handle(mux, "/internal/groups", func(context.Context, struct{}) ([]peerrpc.WireGroupStatus, error) {
		return status.Groups(n.allGroups()), nil
	})
	return mux
}
