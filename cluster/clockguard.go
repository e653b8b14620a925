package cluster

import (
	"context"
	"errors"

	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
)

// DefaultMaxClockOffset is Δ, the largest offset the clock guard lets two
// nodes that stamp decisions have between their clocks (see clock.Guard).
const DefaultMaxClockOffset = clock.DefaultMaxOffset

// newClockGuard is the node's clock guard (clock.Guard): it reads every
// proven, alive peer's clock over the internal RPC, and a change of verdict
// goes to gossip and to placement, which hands the groups of a node whose
// clock is off to nodes whose clocks agree.
func (n *Node) newClockGuard() *clock.Guard {
	return clock.NewGuard(clock.GuardConfig{
		MaxOffset: n.opts.MaxClockOffset,
		Clock:     n.opts.Clock,
		Peers: func() ([]clock.Peer, bool) {
			if n.members == nil {
				return nil, false
			}
			var peers []clock.Peer
			for _, m := range n.trustedMembers() {
				if m.State == membership.Alive && m.Meta.RaftAddr != "" {
					peers = append(peers, clock.Peer{Addr: m.Meta.RaftAddr, InBounds: !m.Meta.ClockOff})
				}
			}
			return peers, true
		},
		Read: func(ctx context.Context, addr string) (int64, error) {
			return peerrpc.Call[int64](ctx, n.rpc, addr, "/internal/time", struct{}{})
		},
		Alone: func() bool { return raftgroup.Alone(n.allGroups(), n.opts.NodeID) },
		OnChange: func(off bool) {
			n.members.SetClockOff(off)
			kick(n.placementCh)
		},
		Logger: n.logger,
	})
}

// clockErr returns clock.ErrOff, joined with errs.ErrNotLeader, unless this
// node's clock is in bounds.
func (n *Node) clockErr() error {
	if err := n.clockGuard.Err(); err != nil {
		return errors.Join(errs.ErrNotLeader, err)
	}
	return nil
}
