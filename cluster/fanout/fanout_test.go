package fanout

import (
	"context"
	"errors"
	"fmt"
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
	ds, err := ByGroup(context.Background(), reqs, groups, echo)
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
	_, err = ByGroup(context.Background(), reqs, groups, failOne)
	assert.ErrorIs(t, err, errs.ErrOutcomeUnknown, "other groups' parts were decided")
	assert.ErrorIs(t, err, errs.ErrUnavailable)

	_, err = ByGroup(context.Background(), reqs[:1], groups, failOne)
	assert.True(t, errors.Is(err, errs.ErrUnavailable) && !errors.Is(err, errs.ErrOutcomeUnknown), "one group: its own error")
}
