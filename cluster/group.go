package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/raftlog"
)

// metaGroupID names the group that holds the configuration.
const metaGroupID = "meta"

// group is one raft group hosted on this node: its FSM, its raft instance
// and stores, and (for data groups) the batcher that group-commits
// decisions while this node leads it.
type group struct {
	id     string
	index  int // data groups 0..G-1; the meta group is G
	logger *slog.Logger
	fsm    *fsm.FSM
	raft   *raft.Raft
	store  *raftlog.Store
	trans  raft.Transport
	batch  *batcher // nil for the meta group

	// serving is true while this node leads the group and has applied a
	// barrier in its term, so its FSM holds every committed entry.
	serving atomic.Bool
	// barrierTerm is the term of the last barrier applied as leader: reads
	// are answered only in that term (see verifyRead).
	barrierTerm atomic.Uint64
	// changed is closed and replaced whenever leadership changes.
	mu      sync.Mutex
	changed chan struct{}

	onChange func()
	stop     chan struct{}
	wg       sync.WaitGroup
}

// groupConfig is what openGroup needs.
type groupConfig struct {
	id        string
	index     int
	bootstrap bool           // bootstrap a group with no state, with this node as its only voter
	dir       string         // snapshots
	store     *raftlog.Store // closed by the group
	nodeID    string
	addr      raft.ServerAddress
	trans     raft.Transport
	timings   RaftTimings
	logger    *slog.Logger
	logLevel  slog.Level
	fsmOpts   fsm.Options
	onServing func(*group) // called (in its own goroutine) when the node starts serving the group
	onChange  func()       // called when the node starts or stops serving the group; must not block
}

// openGroup starts a group's raft instance on c.store, with snapshots
// under c.dir. A group with no state is bootstrapped with this node as
// its only voter if c.bootstrap is set; otherwise it waits, without voting,
// to be added by the group's leader.
func openGroup(c groupConfig) (*group, error) {
	store := c.store
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		store.Close()
		return nil, err
	}
	f, err := fsm.New(c.fsmOpts)
	if err != nil {
		store.Close()
		return nil, err
	}
	hl := newHCLogger(c.logger, "raft", c.logLevel)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(c.dir, 2, hl)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("group %s: open snapshots: %w", c.id, err)
	}
	logs, err := raft.NewLogCache(1024, store)
	if err != nil {
		store.Close()
		return nil, err
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.nodeID)
	rc.HeartbeatTimeout = c.timings.HeartbeatTimeout
	rc.ElectionTimeout = c.timings.ElectionTimeout
	rc.LeaderLeaseTimeout = c.timings.LeaderLeaseTimeout
	rc.CommitTimeout = c.timings.CommitTimeout
	rc.SnapshotInterval = c.timings.SnapshotInterval
	rc.SnapshotThreshold = c.timings.SnapshotThreshold
	if c.timings.TrailingLogs > 0 {
		rc.TrailingLogs = c.timings.TrailingLogs
	}
	// BatchApplyCh stays off: with it, raft buffers Apply and Barrier
	// futures in a channel that nothing drains once raft shuts down, so a
	// future queued at that moment never completes and whoever waits on it
	// hangs (hashicorp/raft v1.8.0; we hit it as a Close that never returned).
	// Raft still gathers whatever Apply calls are waiting into one dispatch,
	// and the batcher already puts many decisions in each entry.
	rc.MaxAppendEntries = 256
	rc.Logger = hl

	has, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		store.Close()
		return nil, err
	}
	if !has && c.bootstrap {
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: c.addr,
		}}}
		if err := raft.BootstrapCluster(rc, logs, store, snaps, c.trans, boot); err != nil {
			store.Close()
			return nil, fmt.Errorf("group %s: bootstrap: %w", c.id, err)
		}
	}
	r, err := raft.NewRaft(rc, f, logs, store, snaps, c.trans)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("group %s: start raft: %w", c.id, err)
	}
	g := &group{
		id:      c.id,
		index:   c.index,
		logger:  c.logger.With("group", c.id),
		fsm:     f,
		raft:    r,
		store:   store,
		trans:   c.trans,
		changed: make(chan struct{}),
		stop:    make(chan struct{}),
	}
	g.onChange = c.onChange
	g.wg.Add(1)
	go g.watchLeadership(c.onServing)
	return g, nil
}

// watchLeadership keeps serving in step with raft's leadership: on winning
// an election it applies a barrier first, so that reads and decisions start
// from every committed entry.
func (g *group) watchLeadership(onServing func(*group)) {
	defer g.wg.Done()
	ch := g.raft.LeaderCh()
	for {
		select {
		case <-g.stop:
			g.setServing(false)
			return
		case leader := <-ch:
			if !leader {
				g.setServing(false)
				continue
			}
			for g.raft.State() == raft.Leader {
				term := g.raft.CurrentTerm()
				if err := waitFuture(g.raft.Barrier(5*time.Second), g.stop); err == nil {
					if g.raft.CurrentTerm() != term {
						continue // leadership changed under the barrier: again, in the new term
					}
					g.barrierTerm.Store(term)
					g.setServing(true)
					if onServing != nil {
						go onServing(g)
					}
					break
				} else if errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, errAbandoned) {
					return
				}
			}
		}
	}
}

func (g *group) setServing(v bool) {
	if g.serving.Swap(v) == v {
		return
	}
	g.logger.Info("leadership changed", "serving", v)
	g.mu.Lock()
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
	if g.onChange != nil {
		g.onChange()
	}
}

// leadershipChanged returns a channel closed at the next leadership change.
func (g *group) leadershipChanged() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

// applyLocal proposes one command if this node serves the group and waits
// for its result, converting ctx's deadline into raft's enqueue timeout.
// errNotLeader means nothing was appended.
func (g *group) applyLocal(ctx context.Context, c fsm.Command) (any, error) {
	if !g.serving.Load() {
		return nil, fmt.Errorf("%w: group %s", errNotLeader, g.id)
	}
	if err := fsm.Validate(c); err != nil {
		return nil, fmt.Errorf("group %s: %w", g.id, err)
	}
	if ctx.Err() != nil {
		// Past the caller's deadline nothing is proposed: the caller has
		// been told the outcome is unknown, or will be.
		return nil, fmt.Errorf("%w: group %s: %w", errNotLeader, g.id, ctx.Err())
	}
	fut := g.raft.Apply(fsm.Encode(c), enqueueTimeout(ctx))
	if err := waitFuture(fut, ctx.Done()); errors.Is(err, errAbandoned) {
		return nil, fmt.Errorf("%w: group %s: %w", ErrOutcomeUnknown, g.id, ctx.Err())
	} else if err != nil {
		return nil, raftError(g.id, err)
	}
	return fut.Response(), nil
}

// errAbandoned is waitFuture's answer when the wait was given up.
var errAbandoned = errors.New("stopped waiting for raft")

// waitFuture returns fut's error, or errAbandoned once stop is closed.
// hashicorp/raft leaves some futures unanswered when it shuts down (an entry
// committed but not yet applied), so a wait that must end has to be able to
// give up; the goroutine blocked on such a future stays blocked.
func waitFuture(fut raft.Future, stop <-chan struct{}) error {
	errc := make(chan error, 1)
	go func() { errc <- fut.Error() }()
	select {
	case err := <-errc:
		return err
	case <-stop:
		return errAbandoned
	}
}

// enqueueTimeout is how long raft may wait to accept an entry: what is left
// of ctx's deadline, or 5 s without one.
func enqueueTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return 5 * time.Second
}

// raftError maps the error of a proposal's future to the node's. Only
// ErrNotLeader, ErrLeadershipTransferInProgress and ErrEnqueueTimeout prove
// that nothing was appended (errNotLeader: retry at the leader). Everything
// else is ambiguous: ErrLeadershipLost leaves the entry to commit in a
// later term or not, and ErrRaftShutdown answers every future still in
// flight when raft stops, committed ones included. Only a retry that the
// group can recognise (a request id, or an allow's origin) resolves those.
func raftError(id string, err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		errors.Is(err, raft.ErrEnqueueTimeout) {
		return fmt.Errorf("%w: group %s: %w", errNotLeader, id, err)
	}
	return fmt.Errorf("%w: group %s: %w", ErrOutcomeUnknown, id, err)
}

// verifyRead confirms this node still leads the group, so its FSM holds
// every acknowledged entry and a read from it is linearizable.
func (g *group) verifyRead(ctx context.Context) error {
	if !g.serving.Load() {
		return fmt.Errorf("%w: group %s", errNotLeader, g.id)
	}
	term := g.raft.CurrentTerm()
	if h, ok := g.trans.(interface{ Hurry(time.Duration) }); ok {
		h.Hurry(hurryRead) // VerifyLeader's heartbeats need not wait for the tick
	}
	if err := waitFuture(g.raft.VerifyLeader(), ctx.Done()); errors.Is(err, errAbandoned) {
		return fmt.Errorf("%w: group %s: %w", ErrUnavailable, g.id, ctx.Err())
	} else if errors.Is(err, raft.ErrRaftShutdown) {
		return ErrShuttingDown
	} else if err != nil {
		// A read changes nothing: whatever went wrong, asking the
		// leader again is safe.
		return fmt.Errorf("%w: group %s: %w", errNotLeader, g.id, err)
	}
	// raft's LeaderCh keeps only its latest value, so a node that lost and
	// regained leadership may still be marked serving from the old term
	// while the new term's barrier is pending: its FSM may then lack entries
	// committed by the leader in between. Answer only in a term whose
	// barrier this node has applied; otherwise the caller retries.
	if bt := g.barrierTerm.Load(); bt != term || g.raft.CurrentTerm() != term {
		return fmt.Errorf("%w: group %s: leader in term %d, barrier applied in term %d", errNotLeader, g.id, term, bt)
	}
	return nil
}

// hurryRead is how long a read makes its group's raft requests urgent:
// long enough for VerifyLeader's round of heartbeats.
const hurryRead = 100 * time.Millisecond

// close stops the group's raft and closes its stores.
func (g *group) close() error {
	close(g.stop)
	if g.batch != nil {
		g.batch.close()
	}
	// Close the transport before waiting for raft, so that replication
	// blocked on a peer that does not answer is released at once instead of
	// at its network timeout. Stores close only after raft has stopped.
	fut := g.raft.Shutdown()
	if c, ok := g.trans.(raft.WithClose); ok {
		_ = c.Close()
	}
	err := fut.Error()
	if g.batch != nil {
		g.batch.abandon()
	}
	g.wg.Wait()
	return errors.Join(err, g.store.Close())
}
