package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/cluster/backup"
	"github.com/quorate/quorate/cluster/datadir"
)

// backupTimeout is `quorate backup`'s --timeout unless one is given: a
// cluster of millions of clients takes more than a decision's 10 s.
const backupTimeout = 30 * time.Minute

// backupSummary is what `quorate backup` and `quorate restore` print.
type backupSummary struct {
	File    string         `json:"file"`
	Bytes   int64          `json:"bytes"`
	Seconds float64        `json:"seconds,omitempty"`
	Header  backup.Header  `json:"header"`
	Groups  []groupSummary `json:"groups"`
	DataDir string         `json:"data_dir,omitempty"`
}

// groupSummary is one group of a backup.
type groupSummary struct {
	ID            string `json:"group"`
	Clients       int    `json:"clients"`
	Assignments   int    `json:"assignments"`
	RequestIDs    int    `json:"request_ids"`
	Applied       uint64 `json:"applied_index"`
	ConfigVersion uint64 `json:"config_version"`
	Bytes         int    `json:"bytes"`
	SHA256        string `json:"sha256_prefix"`
}

func summarize(groups []datadir.RestoredGroup) []groupSummary {
	out := make([]groupSummary, len(groups))
	for i, g := range groups {
		out[i] = groupSummary{ID: g.ID, Clients: g.Info.Clients, Assignments: g.Info.Assignments, RequestIDs: g.Info.RequestIDs,
			Applied: g.Info.Applied, ConfigVersion: g.Info.ConfigVersion, Bytes: g.Bytes, SHA256: g.Digest}
	}
	return out
}

// takeBackup is `quorate backup --out FILE`: it streams GET /v1/backup into
// FILE.partial beside FILE, checks every byte as restore would, and only
// then renames it to FILE, so FILE is always a whole backup.
func takeBackup(ctx context.Context, c *client.Node, out string) (any, error) {
	if out == "" {
		return nil, usageError{errors.New("backup needs --out FILE")}
	}
	start := time.Now()
	partial := out + ".partial"
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("backup: %w (a .partial file is left only by a backup still running or killed; remove it)", err)
	}
	defer os.Remove(partial) // fails harmlessly after the rename
	err = c.Backup(ctx, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	h, groups, err := datadir.CheckBackup(partial)
	if err != nil {
		return nil, fmt.Errorf("backup: what the node sent does not check out: %w", err)
	}
	if err := os.Rename(partial, out); err != nil {
		return nil, err
	}
	fi, err := os.Stat(out)
	if err != nil {
		return nil, err
	}
	return backupSummary{File: out, Bytes: fi.Size(), Seconds: time.Since(start).Seconds(), Header: h, Groups: summarize(groups)}, nil
}

// restoreCommand is `quorate restore`: see datadir.Restore and the
// README's "Backup and restore".
func restoreCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the backup file (from quorate backup)")
	dataDir := fs.String("data-dir", "", "the data dir to create: it must not exist, or be empty")
	nodeID := fs.String("node-id", "node1", "the id of the node that will serve from it (its --node-id)")
	raftAddr := fs.String("raft-addr", "127.0.0.1:7071", "that node's --raft-addr")
	logStore := fs.String("log-store", "", `raft log layout: "shared" (the default) or "boltdb"`)
	check := fs.Bool("check", false, "check the backup and print what it holds; write nothing")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *from == "" || (*dataDir == "" && !*check) || fs.NArg() > 0 {
		return usageError{errors.New("restore needs --from FILE and --data-dir DIR (or --check), and no arguments")}
	}
	var (
		h      backup.Header
		groups []datadir.RestoredGroup
		err    error
	)
	if *check {
		h, groups, err = datadir.CheckBackup(*from)
	} else {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		h, groups, err = datadir.Restore(*from, datadir.RestoreOptions{
			DataDir: *dataDir, NodeID: *nodeID, RaftAddr: *raftAddr, LogStore: *logStore, Logger: logger,
		})
	}
	if err != nil {
		return err
	}
	fi, err := os.Stat(*from)
	if err != nil {
		return err
	}
	s := backupSummary{File: *from, Bytes: fi.Size(), Header: h, Groups: summarize(groups)}
	if !*check {
		s.DataDir, _ = filepath.Abs(*dataDir)
	}
	if *asJSON {
		return printJSON(stdout, s)
	}
	printBackup(stdout, s)
	if !*check {
		fmt.Fprintf(stdout, "\nStart it with: quorate serve --data-dir %s --node-id %s --raft-addr %s (and your TLS, token and address flags);\nother nodes then --join it with empty data dirs.\n", *dataDir, *nodeID, *raftAddr)
	}
	return nil
}

// printBackup writes a backup's summary for people.
func printBackup(w io.Writer, s backupSummary) {
	created := time.Unix(0, s.Header.CreatedUnixNano).UTC().Format(time.RFC3339)
	fmt.Fprintf(w, "%s: %s, taken %s through %s (quorate %s, cluster version %d), %d data groups\n",
		s.File, byteSize(s.Bytes), created, s.Header.TakenBy, s.Header.Binary, s.Header.ClusterVersion, s.Header.Groups)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCLIENTS\tASSIGNMENTS\tREQUEST IDS\tAPPLIED\tCONFIG\tBYTES\tSHA-256")
	var clients int
	for _, g := range s.Groups {
		clients += g.Clients
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\tv%d\t%s\t%s\n", g.ID, g.Clients, g.Assignments, g.RequestIDs,
			g.Applied, g.ConfigVersion, byteSize(int64(g.Bytes)), g.SHA256)
	}
	tw.Flush()
	switch {
	case s.DataDir != "":
		fmt.Fprintf(w, "restored %d clients into %s\n", clients, s.DataDir)
	case s.Seconds > 0:
		fmt.Fprintf(w, "backed up %d clients in %.1f s; checked\n", clients, s.Seconds)
	default:
		fmt.Fprintf(w, "%d clients; the backup checks out\n", clients)
	}
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
