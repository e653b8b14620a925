// Command logreplay reads one group's raft log from a stopped node's data
// dir and replays it, from the oldest snapshot the node keeps, through a
// fresh state machine: it prints every entry (index, term, a digest of its
// bytes) and, for the clients asked for, every request and the decision the
// replay makes for it. Diffing the entry lists of a group's replicas shows
// whether their logs agree; comparing the replayed decisions with a fault
// run's history shows whether the answers callers got are the ones the
// committed log gives.
//
//	go run ./jepsen/cmd/logreplay -dir results/crash-n3-1/nodes/n1 -group 3 -client acct-0
//
// A replica's own snapshots may all be newer than the entries in question
// (or older than its log's start); -snapshots takes them from another
// replica's data dir instead: the replicas' logs agree where they overlap,
// so another's snapshot and this log replay as one history.
package main

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/raftlog"
)

func main() {
	dir := flag.String("dir", "", "a stopped node's --data-dir")
	group := flag.String("group", "0", "group id (0.. or meta)")
	clients := flag.String("client", "", "comma-separated clients whose requests and replayed decisions to print")
	entries := flag.Bool("entries", true, "print one line per entry (index, term, type, digest)")
	until := flag.Uint64("until", 0, "stop after this index (0: the log's end), to compare states at one index")
	snapshots := flag.String("snapshots", "", "another replica's --data-dir whose snapshots of the group to start from (default: -dir's)")
	flag.Parse()
	if err := run(*dir, cmp.Or(*snapshots, *dir), *group, strings.Split(*clients, ","), *entries, *until, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "logreplay:", err)
		os.Exit(1)
	}
}

func run(dataDir, snapDir, group string, clients []string, printEntries bool, until uint64, w io.Writer) error {
	raw, err := os.ReadFile(filepath.Join(dataDir, "quorate.json"))
	if err != nil {
		return err
	}
	var cf raftgroup.ClusterFile
	if err := json.Unmarshal(raw, &cf); err != nil {
		return err
	}
	stores, err := raftgroup.OpenLogStores(dataDir, cmp.Or(cf.LogStore, raftgroup.LogStoreBoltDB), raftlog.Options{})
	if err != nil {
		return err
	}
	defer stores.Close()
	gdir := filepath.Join(dataDir, "groups", raftgroup.Dir(group))
	st, err := stores.Open(group, gdir)
	if err != nil {
		return err
	}
	defer st.Close()
	first, err := st.FirstIndex()
	if err != nil {
		return err
	}
	last, err := st.LastIndex()
	if err != nil {
		return err
	}
	if until > 0 {
		last = min(last, until)
	}
	term, _ := st.GetUint64([]byte("CurrentTerm"))
	fmt.Fprintf(w, "# %s group %s: log %d..%d, current term %d\n", dataDir, group, first, last, term)

	f, err := fsm.New(fsm.Options{})
	if err != nil {
		return err
	}
	from := uint64(1)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(snapDir, "groups", raftgroup.Dir(group)), 2, nil)
	if err != nil {
		return err
	}
	metas, err := snaps.List()
	if err != nil {
		return err
	}
	for _, m := range metas {
		fmt.Fprintf(w, "# snapshot %s at index %d term %d\n", m.ID, m.Index, m.Term)
	}
	if first > 1 {
		// The log was compacted: start from the oldest snapshot that the
		// log continues (at or after the compaction point, not past its end).
		slices.SortFunc(metas, func(a, b *raft.SnapshotMeta) int { return cmp.Compare(a.Index, b.Index) })
		i := slices.IndexFunc(metas, func(m *raft.SnapshotMeta) bool { return m.Index+1 >= first && m.Index <= last })
		if i < 0 {
			return fmt.Errorf("log %d..%d and no snapshot it continues", first, last)
		}
		_, rc, err := snaps.Open(metas[i].ID)
		if err != nil {
			return err
		}
		if err := f.Restore(rc); err != nil {
			return err
		}
		from = metas[i].Index + 1
		fmt.Fprintf(w, "# replay from snapshot %s: entries %d..%d\n", metas[i].ID, from, last)
	}
	want := map[string]bool{}
	for _, c := range clients {
		if c != "" {
			want[c] = true
		}
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := st.GetLog(i, &l); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if printEntries {
			sum := sha256.Sum256(l.Data)
			fmt.Fprintf(w, "E %d %d %s %s\n", l.Index, l.Term, l.Type, hex.EncodeToString(sum[:6]))
		}
		// Entries before the replay's start are printed with their
		// requests but no decisions: the state they were made from is not
		// known.
		var out any
		if i >= from {
			out = f.ApplyBatch([]*raft.Log{&l})[0]
		}
		if len(want) == 0 || l.Type != raft.LogCommand {
			continue
		}
		c, err := fsm.Decode(l.Data)
		if err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		a, ok := c.(fsm.Allow)
		if !ok {
			continue
		}
		res, _ := out.(*fsm.AllowResult)
		for k, r := range a.Requests {
			if !want[r.Client] {
				continue
			}
			line := fmt.Sprintf("R %d %d stamp=%d client=%s cost=%d id=%q origin=%x retry=%t", l.Index, l.Term, a.Stamp, r.Client, r.Cost, r.RequestID, r.Origin, r.Retry)
			if res != nil && k < len(res.Decisions) {
				d := res.Decisions[k]
				line += fmt.Sprintf(" -> allowed=%t remaining=%d dup=%t unresolved=%t at=%d", d.Allowed, d.RemainingTokens(), d.Duplicate, d.Unresolved, d.Stamp)
			}
			fmt.Fprintln(w, line)
		}
	}
	sum := sha256.Sum256(f.MarshalSnapshot())
	fmt.Fprintf(w, "# replayed state at %d: %s\n", f.AppliedIndex(), hex.EncodeToString(sum[:8]))
	buckets, assignments, ids := f.Stats()
	byID, byOrigin := f.Remembered()
	fmt.Fprintf(w, "# high water %d, config version %d, buckets %d, assignments %d, request ids %d (%d by id, %d by origin)\n",
		f.HighWater(), f.ConfigVersion(), buckets, assignments, ids, byID, byOrigin)
	for _, c := range slices.Sorted(maps.Keys(want)) {
		v := f.View(c, 0)
		fmt.Fprintf(w, "V %s tier=%s known=%t remaining=%d\n", c, v.Tier, v.Known, v.Decision.RemainingTokens())
	}
	return nil
}
