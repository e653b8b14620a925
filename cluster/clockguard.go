package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
)

// DefaultMaxClockOffset is Δ, the largest offset the clock guard lets two
// nodes that stamp decisions have between their clocks (see checkClocks).
const DefaultMaxClockOffset = 500 * time.Millisecond

// clockCheckInterval is how often a node whose clock is in bounds compares
// it with its peers'; a node whose clock is unchecked or off checks every
// clockRecheckInterval, so that it serves soon after its clock agrees.
const (
	clockCheckInterval   = 2 * time.Second
	clockRecheckInterval = 200 * time.Millisecond
)

// clockState is what a node knows of its own clock. Only clockInBounds
// stamps: a node starts unchecked (unless it is alone, or the check is
// off) and stamps nothing until a check against its peers finds its clock
// in bounds.
type clockState int32

const (
	clockUnchecked clockState = iota // never compared with a peer since the node started
	clockInBounds
	clockOff
)

func (s clockState) String() string {
	switch s {
	case clockInBounds:
		return "in bounds"
	case clockOff:
		return "off"
	}
	return "unchecked"
}

// errClockOff refuses decisions on a node whose clock is not known to be in
// bounds. It is joined with errNotLeader: nothing was appended, and the
// caller retries at the group's next leader.
var errClockOff = errors.New("this node's clock is not known to agree with its peers': it stamps no decisions")

// checkClocks bounds Δ, the clock offset in the over-admission bound: it
// reads every proven peer's clock over the internal RPC and judges this
// node's clock against them (clock.Judge). A node whose clock is not in
// bounds, including one that has not been checked since it started,
// stamps nothing: it refuses decisions and reclaims (errClockOff, so callers
// go to another leader), is not ready, and says so through gossip, so that
// placement hands its groups' leadership to nodes whose clocks agree and
// never back until its own does. A node that is the only voter of every
// group has nobody to compare with and is in bounds by definition; one that
// has peers but reaches none keeps its verdict.
func (n *Node) checkClocks() {
	if n.opts.MaxClockOffset < 0 || n.members == nil {
		return
	}
	// The mark the stamp clock is re-anchored to if the clock is found in
	// bounds: taken before the readings, so a step after them is not taken in.
	sc, _ := n.opts.Clock.(*clock.Stamp)
	var mark clock.Mark
	if sc != nil {
		mark = sc.Mark()
	}
	var peers []membership.Member
	for _, m := range n.trustedMembers() {
		if m.State == membership.Alive && m.Meta.RaftAddr != "" {
			peers = append(peers, m)
		}
	}
	var (
		mu       sync.Mutex
		readings []clock.Reading
		wg       sync.WaitGroup
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
			readings = append(readings, clock.Reading{Offset: offset, Uncertainty: uncertainty, InBounds: !m.Meta.ClockOff})
		}()
	}
	wg.Wait()
	was := n.clockState()
	if len(readings) == 0 {
		if was == clockUnchecked && n.alone() {
			n.setClockState(clockInBounds, 0, "this node is the only voter of every group: no clock to compare with")
		}
		return
	}
	ok, offset := clock.Judge(readings, was == clockInBounds, n.opts.MaxClockOffset)
	state := clockOff
	if ok {
		state = clockInBounds
		if sc != nil {
			sc.Rebase(mark)
		}
	}
	n.setClockState(state, offset, "")
}

// setClockState records a verdict of checkClocks, logs a change and tells
// gossip and placement.
func (n *Node) setClockState(state clockState, offset time.Duration, why string) {
	n.clockSkew.Store(int64(offset))
	was := clockState(n.clock.Swap(int32(state)))
	if was == state {
		return
	}
	switch {
	case state == clockInBounds && why != "":
		n.logger.Info("this node's clock is in bounds: "+why, "was", was.String())
	case state == clockInBounds:
		n.logger.Info("this node's clock agrees with its peers': it may stamp decisions and lead",
			"offset_from_peers", (-offset).String(), "was", was.String(), "max_clock_offset", n.opts.MaxClockOffset.String())
	default:
		n.logger.Error("this node's clock is too far from its peers': it stamps no decisions and hands its groups' leadership over until its clock agrees",
			"offset_from_peers", (-offset).String(), "allowed", (n.opts.MaxClockOffset / 2).String(), "max_clock_offset", n.opts.MaxClockOffset.String())
	}
	n.members.SetClockOff(state != clockInBounds)
	kick(n.placementCh)
}

func (n *Node) clockState() clockState { return clockState(n.clock.Load()) }

// alone reports whether this node is the only server of every group's raft
// configuration (a one-node cluster), so that no other clock ever stamps
// its groups' entries.
func (n *Node) alone() bool {
	for _, g := range n.allGroups() {
		f := g.Raft.GetConfiguration()
		if f.Error() != nil {
			return false
		}
		servers := f.Configuration().Servers
		if len(servers) != 1 || servers[0].ID != raft.ServerID(n.opts.NodeID) {
			return false
		}
	}
	return true
}

// runClockChecks checks the clock at once, then every clockRecheckInterval
// until it is in bounds and every clockCheckInterval from then on (and
// whenever clockCh fires), until the node stops.
func (n *Node) runClockChecks() {
	if n.opts.MaxClockOffset < 0 {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			n.checkClocks()
			wait := clockRecheckInterval
			if n.clockState() == clockInBounds {
				wait = clockCheckInterval
			}
			t := time.NewTimer(wait)
			select {
			case <-n.stop:
				t.Stop()
				return
			case <-t.C:
			case <-n.clockCh:
				t.Stop()
			}
		}
	}()
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

// clockErr returns errClockOff, joined with errNotLeader, unless this
// node's clock is in bounds.
func (n *Node) clockErr() error {
	if s := n.clockState(); s != clockInBounds {
		return errors.Join(errNotLeader, fmt.Errorf("%w (%s)", errClockOff, s))
	}
	return nil
}
