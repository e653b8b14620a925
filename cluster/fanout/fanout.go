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

// ByGroup decides reqs, for a node of groups data groups (a client's group
// is grouphash.Of), with one decide per group, and returns one decision
// per request, in order.
func ByGroup(ctx context.Context, reqs []fsm.AllowRequest, groups int, decide Decide) ([]fsm.Decision, error) {
	if len(reqs) == 1 {
		return decide(ctx, grouphash.Of(reqs[0].Client, groups), reqs)
	}
	byGroup := map[int][]int{}
	for i, r := range reqs {
		g := grouphash.Of(r.Client, groups)
		byGroup[g] = append(byGroup[g], i)
	}
	if len(byGroup) == 1 {
		return decide(ctx, grouphash.Of(reqs[0].Client, groups), reqs)
	}
	// Decide each group's part in parallel and put answers back in order.
	out := make([]fsm.Decision, len(reqs))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		decided  bool // some group's part was decided
	)
	for gi, idx := range byGroup {
		part := make([]fsm.AllowRequest, len(idx))
		for j, i := range idx {
			part[j] = reqs[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds, err := decide(ctx, gi, part)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil || errors.Is(err, errs.ErrOutcomeUnknown) {
					firstErr = err
				}
				return
			}
			decided = true
			for j, i := range idx {
				out[i] = ds[j]
			}
		}()
	}
	wg.Wait()
	if firstErr != nil && decided && !errors.Is(firstErr, errs.ErrOutcomeUnknown) {
		// The call fails, but not as "nothing was decided": other groups'
		// parts were. Retrying the call with its request ids is how the
		// caller learns them.
		return nil, fmt.Errorf("%w: part of the batch was decided: %w", errs.ErrOutcomeUnknown, firstErr)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}
