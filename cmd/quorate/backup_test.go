package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/quorate/quorate/internal/freeport"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
)

// quorate backup, then quorate restore into a new data dir, then quorate
// serve on it: the same tiers, balances and remembered request ids.
func TestBackupRestoreServe(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, addr, stop := startServe(t, "--data-dir", filepath.Join(dir, "old"))
	_, err := c.PutTier(ctx, "fixed", bucket.Policy{Capacity: 5, Rate: 0}, bucket.Keep)
	require.NoError(t, err)
	require.NoError(t, c.SetClientTier(ctx, "alice", "fixed"))
	for _, id := range []string{"a1", "a2", "a3"} {
		r, err := c.Allow(ctx, "alice", 1, id)
		require.NoError(t, err)
		require.True(t, r.Allowed)
	}

	file := filepath.Join(dir, "cluster.qbak")
	var out, errOut bytes.Buffer
	require.NoError(t, run(ctx, []string{"backup", "--addr", addr, "--out", file}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), "checked")
	assert.Contains(t, out.String(), "GROUP")
	_, err = os.Stat(file + ".partial")
	assert.True(t, os.IsNotExist(err), "the partial file is gone")

	out.Reset()
	require.NoError(t, run(ctx, []string{"restore", "--from", file, "--check"}, &out, &errOut))
	assert.Contains(t, out.String(), "the backup checks out")
	require.NoError(t, stop())

	data, raftAddr := filepath.Join(dir, "new"), freeport.Addr(t)
	out.Reset()
	require.NoError(t, run(ctx, []string{"restore", "--from", file, "--data-dir", data, "--node-id", "n9", "--raft-addr", raftAddr}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), "quorate serve --data-dir "+data+" --node-id n9 --raft-addr "+raftAddr)

	err = run(ctx, []string{"restore", "--from", file, "--data-dir", data, "--node-id", "n9"}, &out, &errOut)
	assert.ErrorContains(t, err, "not empty", "never over a data dir in use")

	c, _, _ = startServe(t, "--data-dir", data, "--node-id", "n9", "--raft-addr", raftAddr)
	got, err := c.GetClient(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, "fixed", got.Tier)
	assert.Equal(t, int64(2), got.Remaining)
	r, err := c.Allow(ctx, "alice", 1, "a2")
	require.NoError(t, err)
	assert.True(t, r.Duplicate, "the request id is remembered")
	assert.Equal(t, int64(3), r.Remaining, "with its original answer")

	good, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, good[:len(good)-10], 0o600))
	err = run(ctx, []string{"restore", "--from", file, "--data-dir", filepath.Join(dir, "third")}, &out, &errOut)
	assert.ErrorContains(t, err, "damaged or incomplete")
	_, err = os.Stat(filepath.Join(dir, "third"))
	assert.True(t, os.IsNotExist(err), "nothing written")

	err = run(ctx, []string{"restore", "--from", file}, &out, &errOut)
	assert.Equal(t, 2, exitCode(err))
}
