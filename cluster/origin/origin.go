// Package origin makes a node's decisions safe to retry when their outcome
// was lost: every request gets an origin of this process's own (Source: an
// epoch, from the meta group once the cluster version allows, and
// consecutive sequence numbers), and a call whose outcome is unknown is
// retried under the same origins (Resolver), so the group answers with the
// decision it made the first time instead of deciding twice.
package origin

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
)

// ResolveFor is how long a node keeps retrying a request whose outcome it
// did not learn, at most (and never past its caller's deadline). It is far
// inside the window in which the group remembers the request by its origin
// (fsm.DefaultOriginDedupWindow), so a retry usually finds the first
// decision; when it cannot, the group says so and the caller is told the
// outcome is unknown.
const ResolveFor = 5 * time.Second

// Source hands out request origins (see fsm.AllowRequest): an epoch and
// consecutive sequence numbers. Its first epoch is chosen at random from
// the upper half of the space (fsm.RandomEpochBase on); once the meta group
// has given this process an epoch of its own (Allocate, from cluster
// version 2), it uses that one, which no other process shares. Its methods
// are safe for concurrent use.
type Source struct {
	mu        sync.Mutex
	epoch     uint32
	next      uint64 // next sequence number of epoch
	allocated bool   // epoch came from the meta group
}

// NewSource returns a source with a random epoch.
func NewSource() *Source {
	o := &Source{}
	o.newEpoch()
	return o
}

func (o *Source) newEpoch() {
	o.epoch, o.next, o.allocated = fsm.RandomEpochBase+rand.Uint32N(fsm.RandomEpochBase), 1, false
}

// SetEpoch makes e, which the meta group gave this process, the epoch of
// every origin from now on. Sequence numbers go on: only the pair must be
// new.
func (o *Source) SetEpoch(e uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.epoch, o.allocated = e, true
}

// Current returns the epoch and whether the meta group gave it.
func (o *Source) Current() (uint32, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.epoch, o.allocated
}

// Take reserves n consecutive origins and returns the first.
func (o *Source) Take(n int) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.next+uint64(n)-1 > fsm.MaxOriginSeq {
		o.newEpoch()
	}
	first := fsm.MakeOrigin(o.epoch, o.next)
	o.next += uint64(n)
	return first
}

// With returns a copy of reqs in which every request has its own origin.
func (o *Source) With(reqs []fsm.AllowRequest) []fsm.AllowRequest {
	out := make([]fsm.AllowRequest, len(reqs))
	first := o.Take(len(reqs))
	for i, r := range reqs {
		r.Origin, r.Retry = first+uint64(i), false
		out[i] = r
	}
	return out
}

// Resolver turns unknown outcomes of one call into retries: every request
// carries its origin, so the group answers a retry with the decision it
// made the first time, decides it if it never did, or says that it cannot
// tell. It retries only until ResolveFor after the first unknown outcome
// and while ctx lasts. One call's attempts use it one after the other.
type Resolver struct {
	ctx   context.Context
	reqs  []fsm.AllowRequest
	until time.Time // zero until an outcome was unknown
}

// NewResolver returns the resolver of one call of reqs (each with its
// origin, see Source.With) under ctx.
func NewResolver(ctx context.Context, reqs []fsm.AllowRequest) *Resolver {
	return &Resolver{ctx: ctx, reqs: reqs}
}

// Requests returns the requests the next attempt proposes: marked as
// retries once an outcome was unknown.
func (r *Resolver) Requests() []fsm.AllowRequest { return r.reqs }

// Check returns err, or, for an unknown outcome that may still be
// resolved, an errs.ErrNotLeader that makes the node's atLeader try again
// with the requests marked as retries.
func (r *Resolver) Check(err error) error {
	if !errors.Is(err, errs.ErrOutcomeUnknown) || r.ctx.Err() != nil {
		return err
	}
	now := time.Now()
	if r.until.IsZero() {
		r.until = now.Add(ResolveFor)
		retry := make([]fsm.AllowRequest, len(r.reqs))
		for i, q := range r.reqs {
			q.Retry = true
			retry[i] = q
		}
		r.reqs = retry // a fresh slice: the first attempt may still hold the old one
	}
	if now.After(r.until) {
		return err
	}
	return fmt.Errorf("%w: retrying to learn an unknown outcome: %w", errs.ErrNotLeader, err)
}

// Finish turns the result of the last attempt into the call's: an error
// after an unknown outcome stays unknown, an unresolved retry is unknown,
// requests the group shed make the call errs.ErrRequestIDsFull (unknown if
// others were decided), and a duplicate that is this call's own first
// decision is reported as the decision it is.
func (r *Resolver) Finish(ds []fsm.Decision, err error) ([]fsm.Decision, error) {
	if err != nil {
		if !r.until.IsZero() && !errors.Is(err, errs.ErrOutcomeUnknown) {
			err = fmt.Errorf("%w: %w", errs.ErrOutcomeUnknown, err)
		}
		return nil, err
	}
	if len(ds) != len(r.reqs) {
		return nil, fmt.Errorf("%w: %d decisions for %d requests", errs.ErrOutcomeUnknown, len(ds), len(r.reqs))
	}
	shed := 0
	for i := range ds {
		if ds[i].Unresolved {
			return nil, fmt.Errorf("%w: the group may have forgotten the first attempt", errs.ErrOutcomeUnknown)
		}
		if ds[i].Shed {
			shed++
		}
	}
	switch {
	case shed == len(ds):
		return nil, fmt.Errorf("%w: the group remembers the most request ids it may", errs.ErrRequestIDsFull)
	case shed > 0:
		return nil, fmt.Errorf("%w: %d of %d requests were decided, the others shed: %w", errs.ErrOutcomeUnknown, len(ds)-shed, len(ds), errs.ErrRequestIDsFull)
	}
	for i := range ds {
		if ds[i].Duplicate && ds[i].Origin == r.reqs[i].Origin {
			ds[i].Duplicate = false
		}
	}
	return ds, nil
}

// Allocate gives o an epoch of this process's own from the meta group,
// once the cluster version allows it (fsm.ClusterVersionOriginsAlways),
// unless it has one: meta's replica proposes it when it leads, else the
// meta group's leader (found with leaderOf) is asked over rpc
// (/internal/epoch, which ServeEpoch answers). It reports the epoch and
// whether it was allocated now; a failure is retried at the next call.
func (o *Source) Allocate(clusterVersion uint32, meta *raftgroup.Group, leaderOf func(*raftgroup.Group) (bool, string), rpc *peerrpc.Client) (uint32, bool) {
	if _, ok := o.Current(); ok || clusterVersion < fsm.ClusterVersionOriginsAlways {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var e uint32
	var err error
	if meta.Serving() {
		if e, err = allocateEpoch(ctx, meta); err != nil {
			return 0, false
		}
	} else {
		self, addr := leaderOf(meta)
		if self || addr == "" {
			return 0, false
		}
		if e, err = peerrpc.Call[uint32](ctx, rpc, addr, "/internal/epoch", struct{}{}); err != nil || e == 0 || e >= fsm.RandomEpochBase {
			return 0, false
		}
	}
	o.SetEpoch(e)
	return e, true
}

// ServeEpoch is /internal/epoch on the meta group's leader: it allocates an
// origin epoch for the asking node's process.
func ServeEpoch(ctx context.Context, meta *raftgroup.Group) (uint32, error) {
	if meta.FSM.ClusterVersion() < fsm.ClusterVersionOriginsAlways {
		return 0, fmt.Errorf("%w: the cluster version does not allocate origin epochs yet", errs.ErrNotLeader)
	}
	return allocateEpoch(ctx, meta)
}

// allocateEpoch proposes an epoch allocation in the meta group, which this
// node leads.
func allocateEpoch(ctx context.Context, meta *raftgroup.Group) (uint32, error) {
	res, err := meta.ApplyLocal(ctx, fsm.AllocateEpoch{})
	if err != nil {
		return 0, err
	}
	r, ok := res.(*fsm.EpochResult)
	if !ok {
		return 0, fmt.Errorf("cluster: allocate epoch: unexpected result %T", res)
	}
	return r.Epoch, nil
}
