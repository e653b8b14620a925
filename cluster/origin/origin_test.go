package origin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/fsm"
)

func TestOriginsAreUniqueAndStartNewEpochs(t *testing.T) {
	o := NewSource()
	a := o.Take(3)
	b := o.Take(1)
	assert.Equal(t, a+3, b, "consecutive within an epoch")
	o.next = fsm.MaxOriginSeq - 1
	c := o.Take(5) // does not fit: a new epoch
	assert.Equal(t, fsm.MakeOrigin(o.epoch, 1), c)
	assert.NotEqual(t, b, c)
}

// A resolver gives up after ResolveFor: the outcome stays unknown, and so
// does any later failure of the call.
func TestResolverGivesUpAfterResolveFor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lost := fmt.Errorf("%w: test: the answer was lost", errs.ErrOutcomeUnknown)
	r := NewResolver(ctx, NewSource().With([]fsm.AllowRequest{{Client: "d", Cost: 1}}))
	require.ErrorIs(t, r.Check(lost), errs.ErrNotLeader)
	r.until = time.Now().Add(-time.Millisecond)
	err := r.Check(lost)
	assert.ErrorIs(t, err, errs.ErrOutcomeUnknown)
	assert.NotErrorIs(t, err, errs.ErrNotLeader)
	_, err = r.Finish(nil, fmt.Errorf("%w: no leader", errs.ErrUnavailable))
	assert.ErrorIs(t, err, errs.ErrOutcomeUnknown, "after an unknown outcome, a later failure is unknown too")
}
