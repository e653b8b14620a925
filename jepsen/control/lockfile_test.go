package control

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Only one holder of the install lock at a time: a second waits until the
// first lets go, or until its context ends.
func TestLockFileIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apt.lock")
	unlock, err := lockFile(context.Background(), path)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = lockFile(ctx, path)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "held by another: the second waits and gives up with its context")

	got := make(chan error, 1)
	go func() {
		u, err := lockFile(context.Background(), path)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	select {
	case err := <-got:
		assert.NoError(t, err, "let go: the waiter takes it")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never took the released lock")
	}
}
