package cluster

import (
	"fmt"
	"syscall"
	"time"
)

// DefaultMinFreeDisk is the free space a node keeps in its data dir's file
// system: below it, it takes no new decisions (see diskGuard).
const DefaultMinFreeDisk = 64 << 20

// diskCheckInterval is how often the node looks at its free space.
const diskCheckInterval = time.Second

// checkDisk reads the free space of the data dir's file system and marks
// the node low on disk below Options.MinFreeDisk, or not, logging each
// change. While it is low, the node refuses new decisions with ErrDiskFull
// (nothing appended) and is not ready: a log that runs out of space would
// stop the node at its next write (pebble cannot go on after a failed WAL
// write; raft-boltdb fails the commit, and nothing is acknowledged either
// way), so it stops taking work while there is room to spare. Entries
// already in flight, configuration and membership changes still go
// through; they are small.
func (n *Node) checkDisk() {
	if n.opts.MinFreeDisk < 0 {
		return
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.opts.DataDir, &st); err != nil {
		n.logger.Warn("cannot read the data dir's free space", "dir", n.opts.DataDir, "err", err)
		return
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	n.diskFree.Store(free)
	low := free < n.opts.MinFreeDisk
	if n.diskLow.Swap(low) != low {
		if low {
			n.logger.Error("the data dir's disk is nearly full: refusing new decisions until space is freed",
				"dir", n.opts.DataDir, "free_bytes", free, "min_free_bytes", n.opts.MinFreeDisk)
		} else {
			n.logger.Warn("the data dir's disk has room again: taking decisions", "free_bytes", free)
		}
	}
}

// diskErr returns ErrDiskFull while the node is low on disk.
func (n *Node) diskErr() error {
	if !n.diskLow.Load() {
		return nil
	}
	return fmt.Errorf("%w: %d bytes free in %s, at least %d kept in reserve", ErrDiskFull, n.diskFree.Load(), n.opts.DataDir, n.opts.MinFreeDisk)
}
