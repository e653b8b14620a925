package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/quorate/quorate/fsm"
)

// resolveFor is how long a node keeps retrying a request whose outcome it
// did not learn, at most (and never past its caller's deadline). It is far
// inside the window in which the group remembers the request by its origin
// (fsm.DefaultOriginDedupWindow), so a retry usually finds the first
// decision; when it cannot, the group says so and the caller is told the
// outcome is unknown.
const resolveFor = 5 * time.Second

// originSource hands out request origins (see fsm.AllowRequest): an epoch
// and consecutive sequence numbers. Its first epoch is chosen at random
// from the upper half of the space (fsm.RandomEpochBase on); once the meta
// group has given this process an epoch of its own (allocateEpoch, from
// cluster version 2), it uses that one, which no other process shares.
type originSource struct {
	mu        sync.Mutex
	epoch     uint32
	next      uint64 // next sequence number of epoch
	allocated bool   // epoch came from the meta group
}

func newOriginSource() *originSource {
	o := &originSource{}
	o.newEpoch()
	return o
}

func (o *originSource) newEpoch() {
	o.epoch, o.next, o.allocated = fsm.RandomEpochBase+rand.Uint32N(fsm.RandomEpochBase), 1, false
}

// setEpoch makes e, which the meta group gave this process, the epoch of
// every origin from now on. Sequence numbers go on: only the pair must be
// new.
func (o *originSource) setEpoch(e uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.epoch, o.allocated = e, true
}

// current returns the epoch and whether the meta group gave it.
func (o *originSource) current() (uint32, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.epoch, o.allocated
}

// take reserves n consecutive origins and returns the first.
func (o *originSource) take(n int) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.next+uint64(n)-1 > fsm.MaxOriginSeq {
		o.newEpoch()
	}
	first := fsm.MakeOrigin(o.epoch, o.next)
	o.next += uint64(n)
	return first
}

// withOrigins returns a copy of reqs in which every request has its own
// origin.
func (n *Node) withOrigins(reqs []fsm.AllowRequest) []fsm.AllowRequest {
	out := make([]fsm.AllowRequest, len(reqs))
	first := n.origins.take(len(reqs))
	for i, r := range reqs {
		r.Origin, r.Retry = first+uint64(i), false
		out[i] = r
	}
	return out
}

// resolver turns unknown outcomes of one call into retries: every request
// carries its origin, so the group answers a retry with the decision it
// made the first time, decides it if it never did, or says that it cannot
// tell. It retries only until resolveFor after the first unknown outcome
// and while ctx lasts.
type resolver struct {
	ctx   context.Context
	reqs  []fsm.AllowRequest
	until time.Time // zero until an outcome was unknown
}

// check returns err, or, for an unknown outcome that may still be resolved,
// an errNotLeader that makes atLeader try again with the requests marked
// as retries.
func (r *resolver) check(err error) error {
	if !errors.Is(err, ErrOutcomeUnknown) || r.ctx.Err() != nil {
		return err
	}
	now := time.Now()
	if r.until.IsZero() {
		r.until = now.Add(resolveFor)
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
	return fmt.Errorf("%w: retrying to learn an unknown outcome: %w", errNotLeader, err)
}

// finish turns the result of the last attempt into the call's: an error
// after an unknown outcome stays unknown, an unresolved retry is unknown,
// requests the group shed make the call ErrRequestIDsFull (unknown if
// others were decided), and a duplicate that is this call's own first
// decision is reported as the decision it is.
func (r *resolver) finish(ds []fsm.Decision, err error) ([]fsm.Decision, error) {
	if err != nil {
		if !r.until.IsZero() && !errors.Is(err, ErrOutcomeUnknown) {
			err = fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		}
		return nil, err
	}
	if len(ds) != len(r.reqs) {
		return nil, fmt.Errorf("%w: %d decisions for %d requests", ErrOutcomeUnknown, len(ds), len(r.reqs))
	}
	shed := 0
	for i := range ds {
		if ds[i].Unresolved {
			return nil, fmt.Errorf("%w: the group may have forgotten the first attempt", ErrOutcomeUnknown)
		}
		if ds[i].Shed {
			shed++
		}
	}
	switch {
	case shed == len(ds):
		return nil, fmt.Errorf("%w: the group remembers the most request ids it may", ErrRequestIDsFull)
	case shed > 0:
		return nil, fmt.Errorf("%w: %d of %d requests were decided, the others shed: %w", ErrOutcomeUnknown, len(ds)-shed, len(ds), ErrRequestIDsFull)
	}
	for i := range ds {
		if ds[i].Duplicate && ds[i].Origin == r.reqs[i].Origin {
			ds[i].Duplicate = false
		}
	}
	return ds, nil
}
