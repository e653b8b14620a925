package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/quorate/quorate/cluster/placer"
)

// Close stops the node without leaving the cluster (peers see it as failed
// until it returns): its loops stop, then every group it leads is handed to
// another voter (raftgroup.Group.HandOver) and stopped at once, queued requests failing
// with ErrShuttingDown; stores are closed last. Acknowledged decisions are
// already durable.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.wg.Wait()
		var errs []error
		if n.members != nil {
			errs = append(errs, n.members.Shutdown())
		}
		// Each group stops right after its hand-over: the new leader's
		// placer may want to give leadership back to this node, still its
		// preferred leader, and a raft that is still running would take it.
		var (
			wg sync.WaitGroup
			mu sync.Mutex
		)
		for _, g := range n.allGroups() {
			if g == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.HandOver(n.opts.NodeID, n.opts.Raft.ElectionTimeout, n.reach.LiveVoters, n.logger)
				err := g.Close()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if n.rpcSrv != nil {
			_ = n.rpcSrv.Close()
		}
		n.fwd.Close(ErrShuttingDown)
		if n.net != nil {
			errs = append(errs, n.net.Close())
		}
		errs = append(errs, n.mux.Close())
		if n.logs != nil {
			errs = append(errs, n.logs.Close())
		}
		n.closeErr = errors.Join(errs...)
		close(n.done)
	})
	return n.closeErr
}

// Done is closed once the node has stopped (after Close or Leave).
func (n *Node) Done() <-chan struct{} { return n.done }

// Leave removes this node from the cluster gracefully: it announces that it
// is leaving, hands over the groups it leads, waits until the leaders have
// removed it from every group (or ctx ends), leaves gossip and closes. The
// last node of a cluster just closes.
func (n *Node) Leave(ctx context.Context) error {
	n.leaving.Store(true)
	n.members.SetLeaving()
	kick(n.placementCh)
	removed := func(ctx context.Context) bool {
		return placer.RemovedEverywhere(ctx, n.opts.NodeID, n.members.Snapshot(), n.allGroups(), n.router.LeaderOf, n.rpc)
	}
	if err := placer.WaitRemoved(ctx, removed, func() { kick(n.placementCh) }); err != nil {
		n.logger.Warn("leave: still a voter of some groups; closing anyway", "err", err)
		return errors.Join(err, n.closeAfterLeave())
	}
	return n.closeAfterLeave()
}

func (n *Node) closeAfterLeave() error {
	if err := n.members.Leave(2 * time.Second); err != nil {
		n.logger.Warn("gossip leave", "err", err)
	}
	return n.Close()
}
