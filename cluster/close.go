package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
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
	for {
		if n.removedEverywhere(ctx) {
			break
		}
		select {
		case <-ctx.Done():
			n.logger.Warn("leave: still a voter of some groups; closing anyway", "err", ctx.Err())
			return errors.Join(ctx.Err(), n.closeAfterLeave())
		case <-time.After(100 * time.Millisecond):
			kick(n.placementCh)
		}
	}
	return n.closeAfterLeave()
}

func (n *Node) closeAfterLeave() error {
	if err := n.members.Leave(2 * time.Second); err != nil {
		n.logger.Warn("gossip leave", "err", err)
	}
	return n.Close()
}

// removedEverywhere reports whether no group's leader still counts this
// node as a voter. A group with no other live node cannot drop it.
func (n *Node) removedEverywhere(ctx context.Context) bool {
	alive := 0
	for _, m := range n.members.Snapshot() {
		if m.State == membership.Alive && !m.Meta.Leaving {
			alive++
		}
	}
	if alive == 0 {
		return true // the last node: nobody to hand over to
	}
	for _, g := range n.allGroups() {
		self, addr := n.leaderOf(g)
		if self {
			return false // still leading: the transfer has not happened yet
		}
		if addr == "" {
			return false
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		sts, err := peerrpc.Call[[]peerrpc.WireGroupStatus](cctx, n.rpc, addr, "/internal/groups", struct{}{})
		cancel()
		if err != nil {
			return false
		}
		for _, st := range sts {
			if st.ID == g.ID && slices.Contains(st.Voters, n.opts.NodeID) {
				return false
			}
		}
	}
	return true
}
