package clock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxOffset is Δ, the largest offset the clock guard lets two nodes
// that stamp decisions have between their clocks (see Guard.Check).
const DefaultMaxOffset = 500 * time.Millisecond

// checkInterval is how often a node whose clock is in bounds compares it
// with its peers'; a node whose clock is unchecked or off checks every
// recheckInterval, so that it serves soon after its clock agrees.
const (
	checkInterval   = 2 * time.Second
	recheckInterval = 200 * time.Millisecond
)

// State is what a node knows of its own clock. Only InBounds stamps: a
// node starts Unchecked (unless it is alone, or the check is off) and
// stamps nothing until a check against its peers finds its clock in bounds.
type State int32

// The states of a node's clock.
const (
	Unchecked State = iota // never compared with a peer since the node started
	InBounds
	Off
)

// String names the state as the node's logs do.
func (s State) String() string {
	switch s {
	case InBounds:
		return "in bounds"
	case Off:
		return "off"
	}
	return "unchecked"
}

// ErrOff refuses decisions on a node whose clock is not known to be in
// bounds. The node joins it with errs.ErrNotLeader: nothing was appended,
// and the caller retries at the group's next leader.
var ErrOff = errors.New("this node's clock is not known to agree with its peers': it stamps no decisions")

// Peer is a peer whose clock the guard reads: its raft address, and
// whether it says (through gossip) that its own clock is in bounds.
type Peer struct {
	Addr     string
	InBounds bool
}

// GuardConfig is what a Guard needs of its node, as functions so that the
// guard knows nothing of gossip, raft or the internal RPC.
type GuardConfig struct {
	// MaxOffset is Δ (negative: no check, the clock is always in bounds).
	MaxOffset time.Duration
	// Clock is the clock the node stamps with; a *Stamp is re-anchored
	// whenever it is found in bounds.
	Clock Clock
	// Peers returns the proven, alive peers to read, and false while the
	// node's membership is not running (no check then).
	Peers func() ([]Peer, bool)
	// Read returns the time (unix nanoseconds) of the peer at addr.
	Read func(ctx context.Context, addr string) (int64, error)
	// Alone reports whether the node is the only server of every group.
	Alone func() bool
	// OnChange is told every change of verdict: off is true unless the
	// clock is in bounds (gossip says so, placement moves leaders).
	OnChange func(off bool)
	// Logger receives the verdict's changes.
	Logger *slog.Logger
}

// Guard bounds Δ, the clock offset in the over-admission bound, for one
// node: it holds the verdict on the node's clock (State) and the offset of
// the clocks it is judged against (Skew), as the last Check left them. Its
// methods are safe for concurrent use.
type Guard struct {
	cfg   GuardConfig
	state atomic.Int32
	skew  atomic.Int64
	kick  chan struct{}
}

// NewGuard returns a guard whose clock is unchecked, or in bounds if the
// check is off.
func NewGuard(cfg GuardConfig) *Guard {
	g := &Guard{cfg: cfg, kick: make(chan struct{}, 1)}
	if cfg.MaxOffset < 0 {
		g.state.Store(int32(InBounds)) // the operator turned the check off
	}
	return g
}

// Check reads every peer's clock and judges this node's clock against them
// (Judge). A node whose clock is not in bounds, including one that has not
// been checked since it started, stamps nothing: it refuses decisions and
// reclaims (ErrOff, so callers go to another leader), is not ready, and
// says so through gossip, so that placement hands its groups' leadership to
// nodes whose clocks agree and never back until its own does. A node that
// is the only voter of every group has nobody to compare with and is in
// bounds by definition; one that has peers but reaches none keeps its
// verdict.
func (g *Guard) Check() {
	if g.cfg.MaxOffset < 0 {
		return
	}
	peers, ok := g.cfg.Peers()
	if !ok {
		return
	}
	// The mark the stamp clock is re-anchored to if the clock is found in
	// bounds: taken before the readings, so a step after them is not taken in.
	sc, _ := g.cfg.Clock.(*Stamp)
	var mark Mark
	if sc != nil {
		mark = sc.Mark()
	}
	var (
		mu       sync.Mutex
		readings []Reading
		wg       sync.WaitGroup
	)
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offset, uncertainty, err := g.offset(p.Addr)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			readings = append(readings, Reading{Offset: offset, Uncertainty: uncertainty, InBounds: p.InBounds})
		}()
	}
	wg.Wait()
	was := g.State()
	if len(readings) == 0 {
		if was == Unchecked && g.cfg.Alone() {
			g.set(InBounds, 0, "this node is the only voter of every group: no clock to compare with")
		}
		return
	}
	ok, offset := Judge(readings, was == InBounds, g.cfg.MaxOffset)
	state := Off
	if ok {
		state = InBounds
		if sc != nil {
			sc.Rebase(mark)
		}
	}
	g.set(state, offset, "")
}

// set records a verdict of Check, logs a change and tells OnChange.
func (g *Guard) set(state State, offset time.Duration, why string) {
	g.skew.Store(int64(offset))
	was := State(g.state.Swap(int32(state)))
	if was == state {
		return
	}
	limit := g.cfg.MaxOffset
	switch {
	case state == InBounds && why != "":
		g.cfg.Logger.Info("this node's clock is in bounds: "+why, "was", was.String())
	case state == InBounds:
		g.cfg.Logger.Info("this node's clock agrees with its peers': it may stamp decisions and lead",
			"offset_from_peers", (-offset).String(), "was", was.String(), "max_clock_offset", limit.String())
	default:
		g.cfg.Logger.Error("this node's clock is too far from its peers': it stamps no decisions and hands its groups' leadership over until its clock agrees",
			"offset_from_peers", (-offset).String(), "allowed", (limit / 2).String(), "max_clock_offset", limit.String())
	}
	g.cfg.OnChange(state != InBounds)
}

// State returns the verdict on this node's clock.
func (g *Guard) State() State { return State(g.state.Load()) }

// Skew returns the offset of the clocks this node is judged against from
// its own, as the last Check measured it.
func (g *Guard) Skew() time.Duration { return time.Duration(g.skew.Load()) }

// Kick makes Run check at once (membership changed).
func (g *Guard) Kick() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// Run checks the clock at once, then every recheckInterval until it is in
// bounds and every checkInterval from then on (and whenever Kick is
// called), until stop is closed. It returns at once if the check is off.
func (g *Guard) Run(stop <-chan struct{}) {
	if g.cfg.MaxOffset < 0 {
		return
	}
	for {
		g.Check()
		wait := recheckInterval
		if g.State() == InBounds {
			wait = checkInterval
		}
		t := time.NewTimer(wait)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		case <-g.kick:
			t.Stop()
		}
	}
}

// offset reads the clock of the node at addr: its offset from this node's
// (positive: it is ahead) and the uncertainty of the reading (half the
// round trip).
func (g *Guard) offset(addr string) (offset, uncertainty time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	local := g.cfg.Clock.Now().UnixNano()
	start := time.Now()
	theirs, err := g.cfg.Read(ctx, addr)
	rtt := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	return time.Duration(theirs - (local + int64(rtt)/2)), rtt / 2, nil
}

// Err returns ErrOff, with the state, unless this node's clock is in
// bounds.
func (g *Guard) Err() error {
	if s := g.State(); s != InBounds {
		return fmt.Errorf("%w (%s)", ErrOff, s)
	}
	return nil
}

// NotReady says why a node is not ready for its clock (ErrOff), or nil if
// the clock is in bounds.
func (g *Guard) NotReady() error {
	switch g.State() {
	case Unchecked:
		return fmt.Errorf("%w: not yet compared with its peers'", ErrOff)
	case Off:
		return fmt.Errorf("%w: %v from the clocks it is judged against, at most %v", ErrOff, -g.Skew(), g.cfg.MaxOffset/2)
	}
	return nil
}
