package main

import (
	"fmt"
	"io"

	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/version"
)

// printVersion is `quorate version`: the binary's version, and the range of
// cluster versions it runs (it joins a cluster at any of them, and moves
// the cluster up to the highest once every node runs it).
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "quorate %s\ncluster versions %d..%d\n", version.Binary, fsm.BaseClusterVersion, fsm.MaxClusterVersion)
}
