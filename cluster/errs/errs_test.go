package errs

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
)

// Each error says, by its code's kind, what a caller may do; only an
// unknown outcome may have been appended.
func TestEveryErrorHasTheKindItsContractStates(t *testing.T) {
	for _, e := range All {
		m, ok := api.Lookup(e.Code())
		require.True(t, ok, "%v: code %q is in api's table", e, e.Code())
		want := api.RetrySafe
		switch e {
		case ErrOutcomeUnknown:
			want = api.Unknown
		case ErrClusterVersion:
			want = api.Refused
		}
		assert.Equal(t, want, m.Kind, "%v", e)
		assert.Equal(t, want, e.Kind(), "%v", e)
		assert.NotEmpty(t, e.Wire(), "%v", e)
	}
	assert.ErrorIs(t, ErrOutcomeUnknown, ErrUnavailable)
	assert.ErrorIs(t, ErrNotLeader, ErrUnavailable)
	assert.NotErrorIs(t, ErrNotLeader, ErrOutcomeUnknown)
	assert.NotErrorIs(t, ErrUnavailable, ErrOutcomeUnknown)
}

// Classify gives the classification an error was made with, first in its
// chain, whatever it wraps after it.
func TestClassifyTakesTheFirstInTheChain(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *Error
	}{
		{fmt.Errorf("%w: group 3: %w", ErrOutcomeUnknown, ErrShuttingDown), ErrOutcomeUnknown},
		{fmt.Errorf("%w: group 3: %w", ErrNotLeader, context.DeadlineExceeded), ErrNotLeader},
		{fmt.Errorf("part decided: %w", fmt.Errorf("%w: then %w", ErrOutcomeUnknown, ErrOverloaded)), ErrOutcomeUnknown},
		{fmt.Errorf("budget: %w", ErrOverloaded), ErrOverloaded},
	} {
		got, ok := Classify(tc.err)
		require.True(t, ok, "%v", tc.err)
		assert.Same(t, tc.want, got, "%v", tc.err)
	}
	_, ok := Classify(errors.New("plain"))
	assert.False(t, ok)
	_, ok = Classify(context.Canceled)
	assert.False(t, ok)
}
