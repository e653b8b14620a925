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

// DefaultMaxClockOffset is how far a node's clock may be from most of its
// peers' before it stops leading (see checkClocks).
const DefaultMaxClockOffset = 500 * time.Millisecond

// clockCheckInterval is how often a node compares its clock with its peers'.
const clockCheckInterval = 2 * time.Second

// errClockOff refuses decisions on a node whose clock is out of bounds. It
// wraps errNotLeader: nothing was appended, and the caller retries at the
// group's next leader.
var errClockOff = errors.New("this node's clock is too far from its peers' to stamp decisions")

// checkClocks bounds Δ, the clock offset in the over-admission bound: it
// reads every proven peer's clock over the internal RPC and, when the
// offset to most of them is beyond Options.MaxClockOffset even allowing for
// the round trip, marks this node's clock off. A node whose clock is off
// stamps nothing: it refuses decisions (errClockOff, so callers go to
// another leader), is not ready, and tells the others through gossip, so
// that placement hands its groups' leadership to nodes whose clocks agree
// and never back while it stays off. A single node has no peer to compare
// with and is never off.
func (n *Node) checkClocks() {
	if n.opts.MaxClockOffset < 0 || n.members == nil {
		return
	}
	var peers []membership.Member
	for _, m := range n.trustedMembers() {
		if m.State == membership.Alive && m.Meta.RaftAddr != "" {
			peers = append(peers, m)
		}
	}
	var (
		mu      sync.Mutex
		offsets []time.Duration // of the peers beyond the bound too
		beyond  int
		wg      sync.WaitGroup
	)
	for _, m := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offset, uncertainty, err := n.clockOffset(m.Meta.RaftAddr)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			offsets = append(offsets, offset)
			if abs(offset)-uncertainty > n.opts.MaxClockOffset {
				beyond++
			}
		}()
	}
	wg.Wait()
	off := len(offsets) > 0 && 2*beyond > len(offsets)
	var median time.Duration
	if len(offsets) > 0 {
		slices.Sort(offsets)
		median = offsets[len(offsets)/2]
	}
	n.clockSkew.Store(int64(median))
	if n.clockOff.Swap(off) != off {
		if off {
			n.logger.Error("this node's clock is too far from its peers': it stops deciding and hands its groups' leadership over until its clock agrees again",
				"offset_to_peers", median.String(), "max", n.opts.MaxClockOffset.String())
		} else {
			n.logger.Warn("this node's clock agrees with its peers' again", "offset_to_peers", median.String())
		}
		n.members.SetClockOff(off)
		kick(n.placementCh)
	}
}

// clockOffset reads the clock of the node at addr: its offset from this
// node's (positive: it is ahead) and the uncertainty of the reading (half
// the round trip).
func (n *Node) clockOffset(addr string) (offset, uncertainty time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	local := n.opts.Clock.Now().UnixNano()
	start := time.Now()
	theirs, err := peerrpc.Call[int64](ctx, n.rpc, addr, "/internal/time", struct{}{})
	rtt := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	return time.Duration(theirs - (local + int64(rtt)/2)), rtt / 2, nil
}

// clockErr returns errClockOff, wrapped as not-leader, while this node's
// clock is off.
func (n *Node) clockErr() error {
	if !n.clockOff.Load() {
		return nil
	}
	return errors.Join(errNotLeader, errClockOff)
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
