// Package fanout decides one call's requests group by group: the requests
// of each data group go to that group's leader together, in parallel with
// the other groups' parts, and the answers come back in the requests'
// order. A call fails as a whole; when some group's part was decided and
// another's failed, it fails as an unknown outcome, never as "nothing was
// decided".
package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/grouphash"
)

// Decide decides part, every request of data group group, in order.
type Decide func(ctx context.Context, group int, part []fsm.AllowRequest) ([]fsm.Decision, error)

// Wait waits for a part Start began and returns its decisions, as Decide
// would have.
type Wait func() ([]fsm.Decision, error)

// Start begins deciding part, every request of data group group, without
// waiting, and returns how to wait for it; or nil if it cannot, and then
// ByGroup decides part with Decide on a goroutine of its own. A node
// starts the parts of the groups it leads: waiting for them one after the
// other on the caller's goroutine costs no goroutine and no hand-off per
// group (a goroutine per group, its stack grown on every call, was about
// 6% of a node's CPU deciding coalesced batches).
type Start func(ctx context.Context, group int, part []fsm.AllowRequest) Wait

// ByGroup decides reqs, for a node of groups data groups (a client's group
// is grouphash.Of), group by group, and returns one decision per request,
// in order. Each group's part is begun by start if it can, or decided by
// decide on a goroutine of its own, in parallel with the other parts.
func ByGroup(ctx context.Context, reqs []fsm.AllowRequest, groups int, start Start, decide Decide) ([]fsm.Decision, error) {
	if len(reqs) == 1 {
		return decide(ctx, grouphash.Of(reqs[0].Client, groups), reqs)
	}
	byGroup := make([][]int, groups)
	parts := 0
	for i, r := range reqs {
		g := grouphash.Of(r.Client, groups)
		if len(byGroup[g]) == 0 {
			parts++
		}
		byGroup[g] = append(byGroup[g], i)
	}
	if parts == 1 {
		return decide(ctx, grouphash.Of(reqs[0].Client, groups), reqs)
	}
	c := collector{out: make([]fsm.Decision, len(reqs))}
	var wg sync.WaitGroup
	waits := make([]Wait, groups)
	for gi, idx := range byGroup {
		if len(idx) == 0 {
			continue
		}
		part := make([]fsm.AllowRequest, len(idx))
		for j, i := range idx {
			part[j] = reqs[i]
		}
		if w := start(ctx, gi, part); w != nil {
			waits[gi] = w
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds, err := decide(ctx, gi, part)
			c.put(idx, ds, err)
		}()
	}
	for gi, w := range waits {
		if w != nil {
			ds, err := w()
			c.put(byGroup[gi], ds, err)
		}
	}
	wg.Wait()
	return c.result()
}

// collector puts the parts' decisions back in the requests' order.
type collector struct {
	mu       sync.Mutex
	out      []fsm.Decision
	firstErr error
	decided  bool // some group's part was decided
}

// put records one part's outcome: ds, for the requests at idx, or err.
func (c *collector) put(idx []int, ds []fsm.Decision, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.firstErr == nil || errors.Is(err, errs.ErrOutcomeUnknown) {
			c.firstErr = err
		}
		return
	}
	c.decided = true
	for j, i := range idx {
		c.out[i] = ds[j]
	}
}

func (c *collector) result() ([]fsm.Decision, error) {
	if c.firstErr != nil && c.decided && !errors.Is(c.firstErr, errs.ErrOutcomeUnknown) {
		// The call fails, but not as "nothing was decided": other groups'
		// parts were. Retrying the call with its request ids is how the
		// caller learns them.
		return nil, fmt.Errorf("%w: part of the batch was decided: %w", errs.ErrOutcomeUnknown, c.firstErr)
	}
	if c.firstErr != nil {
		return nil, c.firstErr
	}
	return c.out, nil
}
