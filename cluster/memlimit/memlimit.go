// Package memlimit is a node's memory budget: what it is measured against,
// read from the operating system and the Go runtime (how much memory the
// process may use, the machine's or its cgroup's limit, for the default
// budget: Default; the runtime's live heap: ReadHeap), and what a node
// refuses near it (Budget, see budget.go). It knows the node only through
// the functions it is given: the replicas' state size, the decisions
// pending, whether a group holds a client.
package memlimit

import (
	"bufio"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
)

// Default is the budget of a node told none (cluster.Options.MaxMemory
// zero): a quarter of what the process may use, its cgroup's memory limit
// or else the machine's memory (1 GiB if neither can be read).
func Default() int64 {
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

// ReadHeap reads the Go runtime's live heap (the bytes the last garbage
// collection found reachable), its heap objects (live and not yet
// collected) and how many collections have run.
func ReadHeap() (live, objects, cycles uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	for i, v := range []*uint64{&live, &objects, &cycles} {
		if s[i].Value.Kind() == metrics.KindUint64 {
			*v = s[i].Value.Uint64()
		}
	}
	return live, objects, cycles
}
