package placer

import (
	"context"
	"slices"
	"time"

	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
)

// WaitRemoved waits, while the node leaves, until removed reports that no
// group's leader counts it as a voter any more, calling kick (a placement
// round, which hands its groups over) every 100 ms meanwhile. It returns
// ctx's error if ctx ends first.
func WaitRemoved(ctx context.Context, removed func(context.Context) bool, kick func()) error {
	for !removed(ctx) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
			kick()
		}
	}
	return nil
}

// RemovedEverywhere reports whether no leader of groups still counts node
// self as a voter, asking each leader elsewhere (/internal/groups over rpc).
// It is false while self leads a group, a group has no known leader, or a
// leader does not answer; true at once when no other member is alive (the
// last node has nobody to hand its groups to).
func RemovedEverywhere(ctx context.Context, self string, members map[string]membership.Member, groups []*raftgroup.Group,
	leaderOf func(*raftgroup.Group) (bool, string), rpc *peerrpc.Client) bool {
	alive := 0
	for _, m := range members {
		if m.State == membership.Alive && !m.Meta.Leaving {
			alive++
		}
	}
	if alive == 0 {
		return true // the last node: nobody to hand over to
	}
	for _, g := range groups {
		leads, addr := leaderOf(g)
		if leads {
			return false // still leading: the transfer has not happened yet
		}
		if addr == "" {
			return false
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		sts, err := peerrpc.Call[[]peerrpc.WireGroupStatus](cctx, rpc, addr, "/internal/groups", struct{}{})
		cancel()
		if err != nil {
			return false
		}
		for _, st := range sts {
			if st.ID == g.ID && slices.Contains(st.Voters, self) {
				return false
			}
		}
	}
	return true
}
