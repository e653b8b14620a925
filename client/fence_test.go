package client_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheClientLinksNoServerCode keeps package client what a service can
// afford to import: the public wire types, the bucket arithmetic and the
// standard library, never raft, storage, gossip or metrics.
func TestTheClientLinksNoServerCode(t *testing.T) {
	goBin, err := exec.LookPath("go") // go test runs with the go command on PATH
	require.NoError(t, err)
	out, err := exec.Command(goBin, "list", "-deps", "github.com/quorate/quorate/client").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/quorate/quorate/api", "the list is the client's dependencies")
	for _, d := range deps {
		for _, banned := range []string{"hashicorp/raft", "cockroachdb/pebble", "boltdb", "bbolt", "hashicorp/memberlist", "prometheus",
			"quorate/cluster", "quorate/fsm", "quorate/transport", "quorate/raftlog"} {
			assert.NotContains(t, d, banned, "package client depends on %s", d)
		}
	}
	for _, d := range deps {
		// A module outside the standard library has a domain first.
		if first, _, _ := strings.Cut(d, "/"); strings.Contains(first, ".") && !strings.HasPrefix(d, "github.com/quorate/quorate/") {
			assert.Fail(t, "a third-party dependency", "package client depends on %s", d)
		}
	}
}
