// Package raftgroup runs one raft group on a node: its lifecycle (Open,
// leadership and serving, Close), its proposals and linearizable reads
// (ApplyLocal, VerifyRead) with the mapping of raft's errors to the node's
// (raftError), the group commit of decisions (Batcher), the raft log stores
// and the data dir's quorate.json (store.go), and raft's logger. It knows
// nothing of other nodes: package cluster routes requests to groups, and
// places and moves their replicas.
package raftgroup

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

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/raftlog"
)

// MetaGroupID names the group that holds the configuration.
const MetaGroupID = "meta"

// Group is one raft group hosted on this node: its FSM, its raft instance
// and stores, and (for data groups) the Batcher that group-commits
// decisions while this node leads it. ID, Index, FSM, Raft and Store are set by
// Open and never change; Batch is set once, before the group takes any
// request.
type Group struct {
	ID     string
	Index  int // data groups 0..G-1; the meta group is G
	FSM    *fsm.FSM
	Raft   *raft.Raft
	Store  *raftlog.Store // the group's raft log and stable store
	Batch  *Batcher       // nil for the meta group
	logs   *raftlog.Cache // in front of Store
	logger *slog.Logger
	trans  raft.Transport
	// appends is what the group's transport saw its followers take (nil
	// if the transport could not be wrapped); heartbeat bounds how old
	// an append may be to count (see CaughtUp): a heartbeat timeout, or
	// two commit timeouts if longer.
	appends   *followerAppends
	heartbeat time.Duration

	// serving is true while this node leads the group and has applied a
	// barrier in its term, so its FSM holds every committed entry.
	serving atomic.Bool
	// barrierTerm is the term of the last barrier applied as leader: reads
	// are answered only in that term (see VerifyRead).
	barrierTerm atomic.Uint64
	// changed is closed and replaced whenever leadership changes.
	mu      sync.Mutex
	changed chan struct{}

	onChange func()
	stop     chan struct{}
	wg       sync.WaitGroup
}

// Config is what Open needs.
type Config struct {
	ID        string
	Index     int
	Bootstrap bool           // bootstrap a group with no state, with this node as its only voter
	Dir       string         // snapshots
	Store     *raftlog.Store // closed by the group
	// LogCacheBytes is the size of the in-memory cache of the group's
	// newest log entries (raftlog.DefaultLogCacheBytes if zero).
	LogCacheBytes int
	NodeID        string
	Addr          raft.ServerAddress
	Trans         raft.Transport
	Timings       Timings
	Logger        *slog.Logger
	LogLevel      slog.Level
	FSMOpts       fsm.Options
	OnServing     func(*Group) // called (in its own goroutine) when the node starts serving the group
	OnChange      func()       // called when the node starts or stops serving the group; must not block
	// OnContact, if set, is called with a peer's address whenever it
	// answered one of this group's raft requests; it must be cheap.
	OnContact func(raft.ServerAddress)
}

// Open starts a group's raft instance on c.Store, with snapshots
// under c.Dir. A group with no state is bootstrapped with this node as
// its only voter if c.Bootstrap is set; otherwise it waits, without voting,
// to be added by the group's leader.
func Open(c Config) (*Group, error) {
	store := c.Store
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		store.Close()
		return nil, err
	}
	f, err := fsm.New(c.FSMOpts)
	if err != nil {
		store.Close()
		return nil, err
	}
	// raft's own lines name the group, as the node's do: a node runs one
	// raft per group, and a line without it cannot be told apart.
	hl := NewHCLogger(c.Logger.With("group", c.ID), "raft", c.LogLevel)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(c.Dir, 2, hl)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("group %s: open snapshots: %w", c.ID, err)
	}
	logs := raftlog.NewCache(store, c.LogCacheBytes)

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.Timings.HeartbeatTimeout
	rc.ElectionTimeout = c.Timings.ElectionTimeout
	rc.LeaderLeaseTimeout = c.Timings.LeaderLeaseTimeout
	rc.CommitTimeout = c.Timings.CommitTimeout
	rc.SnapshotInterval = c.Timings.SnapshotInterval
	rc.SnapshotThreshold = c.Timings.SnapshotThreshold
	if c.Timings.TrailingLogs > 0 {
		rc.TrailingLogs = c.Timings.TrailingLogs
	}
	// BatchApplyCh stays off: with it, raft buffers Apply and Barrier
	// futures in a channel that nothing drains once raft shuts down, so a
	// future queued at that moment never completes and whoever waits on it
	// hangs (hashicorp/raft v1.8.0; we hit it as a Close that never returned).
	// Raft still gathers whatever Apply calls are waiting into one dispatch,
	// and the Batcher already puts many decisions in each entry.
	rc.MaxAppendEntries = maxAppendEntries
	rc.Logger = hl

	trans := wrapTransport(c.Trans, c.Timings.ElectionTimeout, c.OnContact)
	has, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		store.Close()
		return nil, err
	}
	if !has && c.Bootstrap {
		boot := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: c.Addr,
		}}}
		if err := raft.BootstrapCluster(rc, logs, store, snaps, trans, boot); err != nil {
			store.Close()
			return nil, fmt.Errorf("group %s: bootstrap: %w", c.ID, err)
		}
	}
	r, err := raft.NewRaft(rc, f, logs, store, snaps, trans)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("group %s: start raft: %w", c.ID, err)
	}
	if lt, ok := c.Trans.(interface{ SetLocalTerm(func() uint64) }); ok {
		// Only heartbeats that cannot change the term take raft's fast
		// path (raftnet.Transport.SetLocalTerm says why).
		lt.SetLocalTerm(r.CurrentTerm)
	}
	g := &Group{
		ID:      c.ID,
		Index:   c.Index,
		logger:  c.Logger.With("group", c.ID),
		FSM:     f,
		Raft:    r,
		Store:   store,
		logs:    logs,
		trans:   trans,
		changed: make(chan struct{}),

		// An idle leader sends each follower an append every one to two
		// commit timeouts (raft's randomTimeout), which may be longer than
		// a heartbeat timeout.
		heartbeat: max(c.Timings.HeartbeatTimeout, 2*c.Timings.CommitTimeout),
		stop:      make(chan struct{}),
	}
	if t, ok := trans.(*transport); ok {
		g.appends = t.appends
	}
	g.onChange = c.OnChange
	g.wg.Add(1)
	go g.watchLeadership(c.OnServing)
	return g, nil
}

// maxAppendEntries is the most entries raft sends a follower in one append.
const maxAppendEntries = 256

// CaughtUp reports whether the follower at addr can take this group's
// leadership without holding the group up: within the last heartbeat
// timeout (or two commit timeouts, the most an idle leader waits between
// appends) it took an append that checked its log, and that append left it
// at most one append (maxAppendEntries) behind this node's last entry.
// A heartbeat answered is not enough: a node that has just restarted
// answers heartbeats at once, while its log is still hundreds of entries
// behind, and raft's transfer refuses every proposal until it has caught
// up (see followerAppends for why a transfer to it can also wedge the
// leader). A group whose transport could not be wrapped (raft's in-memory
// one, in tests) tracks nothing and takes every follower for caught up.
func (g *Group) CaughtUp(addr string) bool {
	if g.appends == nil {
		return true
	}
	at, matched := g.appends.seen(raft.ServerAddress(addr))
	if at.IsZero() || g.appends.now().Sub(at) >= g.heartbeat {
		return false
	}
	return matched+maxAppendEntries >= g.Raft.LastIndex()
}

// DropIdleCache empties the group's log cache if no entry was stored since
// the last call (raftlog.Cache.DropIfIdle) and returns the bytes freed.
func (g *Group) DropIdleCache() int { return g.logs.DropIfIdle() }

// CacheBytes returns what the group's log cache holds.
func (g *Group) CacheBytes() int { return g.logs.Bytes() }

// watchLeadership keeps serving in step with raft's leadership: on winning
// an election it applies a barrier first, so that reads and decisions start
// from every committed entry.
//
// It goes by raft's state, not by the values of LeaderCh, which keeps
// only its latest value: every LeaderCh value and every leadershipPoll it
// looks at the state again, and a barrier that fails (a transfer in
// progress refuses it, for as long as raft's transfer lasts) is retried at
// the next look, not in a loop.
func (g *Group) watchLeadership(onServing func(*Group)) {
	defer g.wg.Done()
	ch := g.Raft.LeaderCh()
	poll := time.NewTicker(leadershipPoll)
	defer poll.Stop()
	for {
		select {
		case <-g.stop:
			g.setServing(false)
			return
		case <-ch:
		case <-poll.C:
		}
		if g.Raft.State() != raft.Leader {
			g.setServing(false)
			continue
		}
		term := g.Raft.CurrentTerm()
		if g.serving.Load() && g.barrierTerm.Load() == term {
			continue
		}
		err := waitFuture(g.Raft.Barrier(5*time.Second), g.stop)
		if errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, errAbandoned) {
			return
		}
		if err != nil || g.Raft.CurrentTerm() != term || g.Raft.State() != raft.Leader {
			continue // leadership changed under the barrier, or it was refused: look again
		}
		g.barrierTerm.Store(term)
		g.setServing(true)
		if onServing != nil {
			go onServing(g)
		}
	}
}

// leadershipPoll is how often watchLeadership looks at raft's state
// besides LeaderCh: a few atomic loads per group.
const leadershipPoll = 20 * time.Millisecond

func (g *Group) setServing(v bool) {
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

// Serving reports whether this node leads the group and has applied a
// barrier in its term, so that it may decide and answer reads.
func (g *Group) Serving() bool { return g.serving.Load() }

// LeadershipChanged returns a channel closed at the next leadership change.
func (g *Group) LeadershipChanged() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

// ApplyLocal proposes one command if this node serves the group and waits
// for its result, converting ctx's deadline into raft's enqueue timeout.
// errs.ErrNotLeader means nothing was appended.
func (g *Group) ApplyLocal(ctx context.Context, c fsm.Command) (any, error) {
	if !g.serving.Load() {
		return nil, fmt.Errorf("%w: group %s", errs.ErrNotLeader, g.ID)
	}
	if err := fsm.Validate(c); err != nil {
		return nil, fmt.Errorf("group %s: %w", g.ID, err)
	}
	if ctx.Err() != nil {
		// Past the caller's deadline nothing is proposed: the caller has
		// been told the outcome is unknown, or will be.
		return nil, fmt.Errorf("%w: group %s: %w", errs.ErrNotLeader, g.ID, ctx.Err())
	}
	fut := g.Raft.Apply(fsm.Encode(c), enqueueTimeout(ctx))
	if err := waitFuture(fut, ctx.Done()); errors.Is(err, errAbandoned) {
		return nil, fmt.Errorf("%w: group %s: %w", errs.ErrOutcomeUnknown, g.ID, ctx.Err())
	} else if err != nil {
		return nil, raftError(g.ID, err)
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
// that nothing was appended (errs.ErrNotLeader: retry at the leader). Everything
// else is ambiguous: ErrLeadershipLost leaves the entry to commit in a
// later term or not, and ErrRaftShutdown answers every future still in
// flight when raft stops, committed ones included. Only a retry that the
// group can recognise (a request id, or an allow's origin) resolves those.
func raftError(id string, err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		errors.Is(err, raft.ErrEnqueueTimeout) {
		return fmt.Errorf("%w: group %s: %w", errs.ErrNotLeader, id, err)
	}
	return fmt.Errorf("%w: group %s: %w", errs.ErrOutcomeUnknown, id, err)
}

// VerifyRead confirms this node still leads the group, so its FSM holds
// every acknowledged entry and a read from it is linearizable.
func (g *Group) VerifyRead(ctx context.Context) error {
	if !g.serving.Load() {
		return fmt.Errorf("%w: group %s", errs.ErrNotLeader, g.ID)
	}
	term := g.Raft.CurrentTerm()
	if h, ok := g.trans.(interface{ Hurry(time.Duration) }); ok {
		h.Hurry(hurryRead) // VerifyLeader's heartbeats need not wait for the tick
	}
	if err := waitFuture(g.Raft.VerifyLeader(), ctx.Done()); errors.Is(err, errAbandoned) {
		return fmt.Errorf("%w: group %s: %w", errs.ErrUnavailable, g.ID, ctx.Err())
	} else if errors.Is(err, raft.ErrRaftShutdown) {
		return errs.ErrShuttingDown
	} else if err != nil {
		// A read changes nothing: whatever went wrong, asking the
		// leader again is safe.
		return fmt.Errorf("%w: group %s: %w", errs.ErrNotLeader, g.ID, err)
	}
	// raft's LeaderCh keeps only its latest value, so a node that lost and
	// regained leadership may still be marked serving from the old term
	// while the new term's barrier is pending: its FSM may then lack entries
	// committed by the leader in between. Answer only in a term whose
	// barrier this node has applied; otherwise the caller retries.
	if bt := g.barrierTerm.Load(); bt != term || g.Raft.CurrentTerm() != term {
		return fmt.Errorf("%w: group %s: leader in term %d, barrier applied in term %d", errs.ErrNotLeader, g.ID, term, bt)
	}
	return nil
}

// hurryRead is how long a read makes its group's raft requests urgent:
// long enough for VerifyLeader's round of heartbeats.
const hurryRead = 100 * time.Millisecond

// Close stops the group's raft and closes its stores.
func (g *Group) Close() error {
	close(g.stop)
	if g.Batch != nil {
		g.Batch.close()
	}
	// Close the transport before waiting for raft, so that replication
	// blocked on a peer that does not answer is released at once instead of
	// at its network timeout. Stores close only after raft has stopped.
	fut := g.Raft.Shutdown()
	if c, ok := g.trans.(raft.WithClose); ok {
		_ = c.Close()
	}
	err := fut.Error()
	if g.Batch != nil {
		g.Batch.abandon()
	}
	g.wg.Wait()
	return errors.Join(err, g.Store.Close())
}
