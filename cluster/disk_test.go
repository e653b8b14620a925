package cluster

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/fsm"
)

// A node whose data dir is nearly full refuses new decisions at once,
// deciding nothing, says so in Ready, and takes decisions again once space
// is freed. The data dir is a small tmpfs of its own.
func TestDiskNearlyFullRefusesDecisions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"))
	t.Cleanup(func() { _ = syscall.Unmount(dir, 0) })

	const reserve = 16 << 20
	n := startNode(t, dir, clock.NewManual(), func(o *Options) { o.MinFreeDisk = reserve })
	ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "ada", Cost: 1}})
	require.NoError(t, err)
	require.True(t, ds[0].Allowed)

	// Fill the file system to 8 MiB short of full.
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	free := int64(st.Bavail) * int64(st.Bsize)
	require.Greater(t, free, int64(reserve), "the node needs the room it starts with")
	filler := filepath.Join(dir, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, free-8<<20), 0o600))
	n.disk.Check()

	_, err = n.Allow(ctx(t), []fsm.AllowRequest{{Client: "ada", Cost: 1}})
	require.ErrorIs(t, err, ErrDiskFull)
	assert.ErrorIs(t, n.Ready(ctx(t)), ErrDiskFull, "a node low on disk is not ready")
	v, err := n.Client(ctx(t), "ada")
	require.NoError(t, err, "reads still work")
	assert.Equal(t, v.Policy.Capacity-1, v.Decision.RemainingTokens(), "the refused decision took nothing")

	require.NoError(t, os.Remove(filler))
	n.disk.Check()
	require.NoError(t, n.Ready(ctx(t)))
	ds, err = n.Allow(ctx(t), []fsm.AllowRequest{{Client: "ada", Cost: 1}})
	require.NoError(t, err)
	assert.Equal(t, v.Policy.Capacity-2, ds[0].RemainingTokens())
}
