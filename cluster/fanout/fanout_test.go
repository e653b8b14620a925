package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/grouphash"
)

// Answers come back in the requests' order whatever group decides them,
// and a call of which one group's part failed after another's was decided
// fails as an unknown outcome.
func TestByGroupKeepsOrderAndNeverHidesADecidedPart(t *testing.T) {
	const groups = 4
	var reqs []fsm.AllowRequest
	for i := range 32 {
		reqs = append(reqs, fsm.AllowRequest{Client: fmt.Sprintf("c%d", i), Cost: int64(i)})
	}
	echo := func(_ context.Context, group int, part []fsm.AllowRequest) ([]fsm.Decision, error) {
		ds := make([]fsm.Decision, len(part))
		for i, r := range part {
			require.Equal(t, group, grouphash.Of(r.Client, groups), "a part holds only its group's clients")
			ds[i].Remaining = r.Cost
		}
		return ds, nil
	}
	none := func(context.Context, int, []fsm.AllowRequest) Wait { return nil }
	ds, err := ByGroup(context.Background(), reqs, groups, none, echo)
	require.NoError(t, err)
	for i := range reqs {
		assert.Equal(t, reqs[i].Cost, ds[i].Remaining, "decision %d", i)
	}

	failOne := func(ctx context.Context, group int, part []fsm.AllowRequest) ([]fsm.Decision, error) {
		if group == grouphash.Of(reqs[0].Client, groups) {
			return nil, fmt.Errorf("%w: test", errs.ErrUnavailable)
		}
		return echo(ctx, group, part)
	}
	_, err = ByGroup(context.Background(), reqs, groups, none, failOne)
	assert.ErrorIs(t, err, errs.ErrOutcomeUnknown, "other groups' parts were decided")
	assert.ErrorIs(t, err, errs.ErrUnavailable)

	_, err = ByGroup(context.Background(), reqs[:1], groups, none, failOne)
	assert.True(t, errors.Is(err, errs.ErrUnavailable) && !errors.Is(err, errs.ErrOutcomeUnknown), "one group: its own error")
}

// Parts that Start begins are waited for, and only the others are
// decided by Decide; the answers and errors are the same either way.
func TestByGroupWaitsForThePartsItStarted(t *testing.T) {
	const groups = 4
	var reqs []fsm.AllowRequest
	for i := range 32 {
		reqs = append(reqs, fsm.AllowRequest{Client: fmt.Sprintf("c%d", i), Cost: int64(i)})
	}
	echo := func(part []fsm.AllowRequest) []fsm.Decision {
		ds := make([]fsm.Decision, len(part))
		for i, r := range part {
			ds[i].Remaining = r.Cost
		}
		return ds
	}
	var started, decided []int
	var mu sync.Mutex
	failing := -1
	start := func(_ context.Context, group int, part []fsm.AllowRequest) Wait {
		if group%2 == 1 {
			return nil
		}
		started = append(started, group) // Start runs on the caller's goroutine
		return func() ([]fsm.Decision, error) {
			if group == failing {
				return nil, fmt.Errorf("%w: test", errs.ErrUnavailable)
			}
			return echo(part), nil
		}
	}
	decide := func(_ context.Context, group int, part []fsm.AllowRequest) ([]fsm.Decision, error) {
		mu.Lock()
		decided = append(decided, group)
		mu.Unlock()
		return echo(part), nil
	}
	ds, err := ByGroup(context.Background(), reqs, groups, start, decide)
	require.NoError(t, err)
	for i := range reqs {
		assert.Equal(t, reqs[i].Cost, ds[i].Remaining, "decision %d", i)
	}
	assert.ElementsMatch(t, []int{0, 2}, started)
	assert.ElementsMatch(t, []int{1, 3}, decided)

	failing, started, decided = 2, nil, nil
	_, err = ByGroup(context.Background(), reqs, groups, start, decide)
	assert.ErrorIs(t, err, errs.ErrOutcomeUnknown, "other groups' parts were decided")
	assert.ErrorIs(t, err, errs.ErrUnavailable)
}
