package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorate/quorate/cluster/datadir"
)

// recoverCommand is `quorate recover`: see datadir.Recover and the README's
// "Recovering from a lost majority".
func recoverCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "the stopped node's data dir")
	voters := fs.String("voters", "", "comma-separated ID=RAFT_ADDR of every node that survives, this one included; the same list on each of them")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *dataDir == "" || *voters == "" || fs.NArg() > 0 {
		return usageError{errors.New("recover needs --data-dir and --voters, and no arguments")}
	}
	var vs []datadir.Voter
	for _, item := range strings.Split(*voters, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || id == "" || addr == "" {
			return usageError{fmt.Errorf("--voters: %q is not ID=RAFT_ADDR", item)}
		}
		vs = append(vs, datadir.Voter{ID: id, RaftAddr: addr})
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := time.Now()
	groups, err := datadir.Recover(*dataDir, vs, logger, func(g datadir.RecoveredGroup) {
		fmt.Fprintf(stderr, "%5.1fs  group %s: replaying its log through index %d into a snapshot\n", time.Since(start).Seconds(), g.ID, g.LastIndex)
	})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tRECOVERED")
	for _, g := range groups {
		what := fmt.Sprintf("through log index %d", g.LastIndex)
		if g.Skipped {
			what = "no replica here"
		}
		fmt.Fprintf(tw, "%s\t%s\n", g.ID, what)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nStart this node and every other voter listed; nodes not listed must not start with their old data.\n")
	return nil
}
