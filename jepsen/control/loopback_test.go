//go:build linux

package control

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoopbackFallback runs a real 3-node cluster without namespaces, on
// 127.0.0.11-13, and checks process faults and clock skew work while
// partitions are refused.
func TestLoopbackFallback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildFaultBinary(t, ctx)
	c, err := New(Options{
		Nodes:     3,
		Binary:    bin,
		WorkDir:   t.TempDir(),
		ExtraArgs: []string{"--groups", "2", "--raft-timeout", "200ms"},
		Logger:    slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	require.NoError(t, err)
	require.False(t, c.UsesNetns())
	t.Cleanup(func() { assert.NoError(t, c.Teardown(context.Background())) })
	require.NoError(t, c.Setup(ctx))
	require.NoError(t, c.StartAll(ctx))
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	defer rcancel()
	require.NoError(t, c.WaitReady(rctx))
	assert.Equal(t, "http://127.0.0.11:7070", c.NodeURL(1))

	err = c.Partition(ctx, NemPartitionHalves, Complete(Halves([]int{1, 2, 3})))
	assert.True(t, errors.Is(err, ErrUnsupported), "%v", err)
	assert.NoError(t, c.Heal(ctx), "Heal has nothing to do")

	l, err := c.Leader(ctx, "meta")
	require.NoError(t, err)
	require.NoError(t, c.KillNodes(ctx, NemKillLeader, l))
	assert.False(t, c.Running(l))
	require.NoError(t, c.SetClock(ctx, NemClockBump, l%3+1, -time.Second))
	require.NoError(t, c.Recover(ctx))
	require.NoError(t, c.WaitReady(rctx))
	for i := 1; i <= 3; i++ {
		off, err := c.Clock(ctx, i)
		require.NoError(t, err)
		assert.Zero(t, off, "n%d", i)
	}
	assert.Equal(t, int64(time.Second), c.ClockOffsets()[nodeID(l%3+1)])

	// A graceful restart: SIGTERM, the node exits by itself, and comes
	// back on its data dir. Placement may still be moving leaderships
	// after the recovery (the restarted node's clock is checked again), so
	// wait for the group's leader rather than look once.
	l, err = c.waitLeader(rctx, "0")
	require.NoError(t, err)
	pid := c.PID(l)
	require.NoError(t, c.TermNodes(ctx, NemTermLeader, l))
	assert.False(t, c.Running(l))
	assert.False(t, alive(pid))
	evs := c.Events()
	last := evs[len(evs)-1]
	assert.Equal(t, []string{NemTermLeader, PhaseStart, "TERM", nodeID(l) + ":0"},
		[]string{last.Name, last.Phase, last.Detail["signal"], last.Detail["exit"]}, "it exited on its own, with status 0")
	require.NoError(t, c.RestartDown(ctx))
	require.NoError(t, c.WaitReady(rctx))
	assert.NotEqual(t, pid, c.PID(l))

	pid = c.PID(1)
	require.NoError(t, c.Teardown(ctx))
	assert.False(t, alive(pid))
}
