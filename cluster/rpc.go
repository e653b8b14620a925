package cluster

import (
	"context"
	"net/http"

	"github.com/quorate/quorate/cluster/clientops"
	"github.com/quorate/quorate/cluster/origin"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/status"
	"github.com/quorate/quorate/fsm"
)

// rpcHandler returns the internal protocol's handler.
func (n *Node) rpcHandler() http.Handler {
	mux := http.NewServeMux()
	peerrpc.Handle(mux, "/internal/client", func(ctx context.Context, req peerrpc.ClientReq) (peerrpc.WireClientView, error) {
		v, err := clientops.View(ctx, n.groupFor(req.Client), n.opts.Clock, req.Client)
		return peerrpc.ToWireClientView(v), err
	})
	peerrpc.Handle(mux, "/internal/set-tier", func(ctx context.Context, req peerrpc.ClientReq) (struct{}, error) {
		return struct{}{}, clientops.SetTier(ctx, n.groupFor(req.Client), n.opts.Clock, req.Client, req.Tier, req.Actor)
	})
	peerrpc.Handle(mux, "/internal/reset-client", func(ctx context.Context, req peerrpc.ClientReq) (bool, error) {
		if err := fsm.Validate(fsm.ResetClient{Client: req.Client}); err != nil {
			return false, err
		}
		return clientops.Reset(ctx, n.groupFor(req.Client), n.opts.Clock, req.Client, req.Actor)
	})
	peerrpc.Handle(mux, "/internal/config-op", func(ctx context.Context, w peerrpc.WireConfigOp) (peerrpc.WireConfigChange, error) {
		op, err := w.Op()
		if err != nil {
			return peerrpc.WireConfigChange{}, err
		}
		cc, err := n.configs.ChangeLocal(ctx, op)
		return peerrpc.WireConfigChange(cc), err
	})
	peerrpc.Handle(mux, "/internal/audit", func(ctx context.Context, req peerrpc.WireAuditReq) (peerrpc.WireAuditPage, error) {
		p, err := n.auditLocal(ctx, req.Since, req.Limit)
		return peerrpc.ToWireAuditPage(p), err
	})
	peerrpc.Handle(mux, "/internal/epoch", func(ctx context.Context, _ struct{}) (uint32, error) {
		return origin.ServeEpoch(ctx, n.meta)
	})
	peerrpc.HandleStream(mux, "/internal/snapshot", n.serveSnapshot)
	peerrpc.Handle(mux, "/internal/cluster-version", func(ctx context.Context, _ struct{}) (uint32, error) {
		if err := n.meta.VerifyRead(ctx); err != nil {
			return 0, err
		}
		return n.meta.FSM.ClusterVersion(), nil
	})
	peerrpc.Handle(mux, "/internal/config", func(ctx context.Context, _ struct{}) (peerrpc.WireConfig, error) {
		if err := n.meta.VerifyRead(ctx); err != nil {
			return peerrpc.WireConfig{}, err
		}
		return peerrpc.ToWireConfig(n.meta.FSM.Config()), nil
	})
	// A hint from the meta leader that a new configuration is committed:
	// reconcile now rather than at the next tick. The body says nothing (a
	// configuration from older nodes, ignored): see configsync.Syncer.Hint.
	peerrpc.Handle(mux, "/internal/install-config", func(_ context.Context, _ struct{}) (struct{}, error) {
		n.configs.Hint()
		return struct{}{}, nil
	})
	peerrpc.Handle(mux, "/internal/whoami", n.whoami) // see peers.go
	peerrpc.Handle(mux, "/internal/time", func(context.Context, struct{}) (int64, error) {
		return n.opts.Clock.Now().UnixNano(), nil // the clock this node stamps with
	})
	peerrpc.Handle(mux, "/internal/groups", func(context.Context, struct{}) ([]peerrpc.WireGroupStatus, error) {
		return status.Groups(n.allGroups()), nil
	})
	return mux
}
