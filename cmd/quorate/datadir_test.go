package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/quorate/quorate/internal/freeport"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A node's data dir holds every client id and request id in its log: no
// other local user may read it. A dir created wide open (0755, by an
// operator or an older release) is made 0700, and every directory and file
// the node writes, pebble's included, is its owner's only.
func TestDataDirIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	addr := freeport.Addr(t)
	startChild(t, addr, "--data-dir", dir, "--raft-addr", freeport.Addr(t), "--gossip-addr", freeport.Addr(t))
	var files int
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Type()&fs.ModeSymlink != 0 {
			return nil
		}
		assert.Zero(t, fi.Mode().Perm()&0o077, "%s is %v", path, fi.Mode().Perm())
		if !fi.IsDir() {
			files++
		}
		return nil
	}))
	assert.Greater(t, files, 5, "the node wrote its files")
}
