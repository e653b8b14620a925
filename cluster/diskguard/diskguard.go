// Package diskguard watches the free space of a node's data dir and refuses
// new work while it is below the reserve (Guard). It reads only the file
// system; the node checks it on its decision path (Err) and in Ready, and
// calls Check every CheckInterval.
package diskguard

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quorate/quorate/cluster/errs"
)

// DefaultMinFree is the free space a node keeps in its data dir's file
// system: below it, it takes no new decisions (see Guard).
const DefaultMinFree = 64 << 20

// CheckInterval is how often the node looks at its free space.
const CheckInterval = time.Second

// Guard holds what Check last saw of the data dir's free space. Its methods
// are safe for concurrent use.
type Guard struct {
	dir     string
	minFree int64 // negative: no check
	logger  *slog.Logger

	free atomic.Int64 // the data dir's free space, as Check last saw it
	low  atomic.Bool  // whether it was below minFree
}

// New returns a Guard of the file system that holds dir, keeping minFree
// bytes in reserve (negative: never low).
func New(dir string, minFree int64, logger *slog.Logger) *Guard {
	return &Guard{dir: dir, minFree: minFree, logger: logger}
}

// Check reads the free space of the data dir's file system and marks the
// node low on disk below the reserve, or not, logging each change. While it
// is low, the node refuses new decisions with errs.ErrDiskFull (nothing
// appended) and is not ready: a log that runs out of space would stop the
// node at its next write (pebble cannot go on after a failed WAL write;
// raft-boltdb fails the commit, and nothing is acknowledged either way), so
// it stops taking work while there is room to spare. Entries already in
// flight, configuration and membership changes still go through; they are
// small.
func (g *Guard) Check() {
	if g.minFree < 0 {
		return
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(g.dir, &st); err != nil {
		g.logger.Warn("cannot read the data dir's free space", "dir", g.dir, "err", err)
		return
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	g.free.Store(free)
	low := free < g.minFree
	if g.low.Swap(low) != low {
		if low {
			g.logger.Error("the data dir's disk is nearly full: refusing new decisions until space is freed",
				"dir", g.dir, "free_bytes", free, "min_free_bytes", g.minFree)
		} else {
			g.logger.Warn("the data dir's disk has room again: taking decisions", "free_bytes", free)
		}
	}
}

// Err returns errs.ErrDiskFull while the node is low on disk.
func (g *Guard) Err() error {
	if !g.low.Load() {
		return nil
	}
	return fmt.Errorf("%w: %d bytes free in %s, at least %d kept in reserve", errs.ErrDiskFull, g.free.Load(), g.dir, g.minFree)
}

// Free returns the free space Check last read (0 before the first).
func (g *Guard) Free() int64 { return g.free.Load() }

// Low reports whether the free space was below the reserve at the last Check.
func (g *Guard) Low() bool { return g.low.Load() }
