package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/quorate/quorate/fsm"
)

// The memory budget (Options.MaxMemory) bounds what callers can make a node
// hold. What grows with callers is state: a bucket per new client, a
// remembered decision per request id, on every replica of the group, for
// minutes. Once the live heap reaches memoryShedAt of the budget, a node
// refuses, at once and deciding nothing, every request that would add
// state (a client it holds no bucket for, or a request id) with
// ErrOverloaded, and keeps deciding for the clients it holds, until reclaim
// and the request-id window bring the heap back under. The check runs on
// the node a call reaches and again on its group's leader. The process
// also sets the budget as the Go runtime's soft memory limit (cmd/quorate),
// so that the heap is collected more often as it nears the budget and the
// live figure stays fresh.
const (
	memoryShedAt        = 0.75
	memoryCheckInterval = 100 * time.Millisecond
)

// errMemoryBudget refuses a request that would add state while the node's
// live heap is near its budget. It wraps ErrOverloaded: nothing was decided.
var errMemoryBudget = fmt.Errorf("%w: memory budget", ErrOverloaded)

// DefaultMaxMemory is the budget of a node without Options.MaxMemory: a
// quarter of what the process may use, its cgroup's memory limit or else
// the machine's memory (1 GiB if neither can be read).
func DefaultMaxMemory() int64 {
	total := machineMemory()
	if cg := cgroupMemoryLimit(); cg > 0 && (total == 0 || cg < total) {
		total = cg
	}
	if total <= 0 {
		return 1 << 30
	}
	return total / 4
}

func machineMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

func cgroupMemoryLimit() int64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil { // "max": no limit
		return 0
	}
	return v
}

// liveHeap reads the Go runtime's live heap: the bytes the last garbage
// collection found reachable.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// checkMemory samples the live heap and sets whether the node sheds new
// state.
func (n *Node) checkMemory() {
	read := n.opts.liveHeap
	if read == nil {
		read = liveHeap
	}
	live := read()
	n.memLive.Store(live)
	shed := n.opts.MaxMemory > 0 && float64(live) >= memoryShedAt*float64(n.opts.MaxMemory)
	if n.memShed.Swap(shed) != shed {
		if shed {
			n.logger.Warn("the live heap is near the memory budget: refusing new clients and request ids until it shrinks",
				"live_bytes", live, "budget_bytes", n.opts.MaxMemory)
		} else {
			n.logger.Info("the live heap is back under the memory budget", "live_bytes", live, "budget_bytes", n.opts.MaxMemory)
		}
	}
}

// memoryErr returns errMemoryBudget if the node sheds new state and one of
// reqs would add some. g is the group every request belongs to, or nil.
func (n *Node) memoryErr(g groupReplica, reqs []fsm.AllowRequest) error {
	if !n.memShed.Load() {
		return nil
	}
	for _, r := range reqs {
		rg := g
		if rg == nil {
			rg = n.groupFor(r.Client).FSM
		}
		if r.RequestID != "" || !rg.Known(r.Client) {
			return fmt.Errorf("%w: this node's live heap is %d MiB of a %d MiB budget; it decides for the clients it holds, without request ids",
				errMemoryBudget, n.memLive.Load()>>20, n.opts.MaxMemory>>20)
		}
	}
	return nil
}

// groupReplica is what memoryErr asks of a group's replica.
type groupReplica interface{ Known(client string) bool }

var _ groupReplica = (*fsm.FSM)(nil)

// isMemoryRefusal reports whether err is the memory budget's refusal.
func isMemoryRefusal(err error) bool { return errors.Is(err, errMemoryBudget) }
