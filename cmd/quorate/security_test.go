package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorate/quorate/internal/freeport"
	"github.com/quorate/quorate/internal/logbuf"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/client"
)

// serveNode runs `quorate serve` in-process on fresh loopback ports with
// args, waits until it is ready and returns a client, its gossip address
// and its log.
func serveNode(t *testing.T, args ...string) (*client.Node, string, *logbuf.Buffer) {
	t.Helper()
	addr, raftAddr, gossipAddr := freeport.Addr(t), freeport.Addr(t), freeport.Addr(t)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &logbuf.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--http-addr", addr, "--raft-addr", raftAddr, "--gossip-addr", gossipAddr,
			"--data-dir", t.TempDir(), "--log-level", "warn", "--groups", "2"}, args...), &bytes.Buffer{}, logs)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	c := client.NewNode(addr, nil)
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			require.FailNow(t, "serve exited early", "%v\n%s", err, logs.String())
		default:
		}
		return c.Ready(context.Background()) == nil
	}, 20*time.Second, 10*time.Millisecond)
	return c, gossipAddr, logs
}

// waitVoters waits until every group c's node sees has n voters.
func waitVoters(t *testing.T, c *client.Node, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, err := c.Cluster(context.Background())
		if err != nil {
			return false
		}
		for _, g := range st.Groups {
			if len(g.Voters) != n {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "the groups never had %d voters", n)
}

// certsInit runs `quorate certs init` for nodes n1 and n2 into a new dir.
func certsInit(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"certs", "init", "--dir", dir, "--nodes", "n1,n2",
		"--hosts", "n1=127.0.0.1,n2=127.0.0.1"}, &out, &bytes.Buffer{}))
	assert.Contains(t, out.String(), "n2-key.pem")
	for _, f := range []string{"ca-key.pem", "n1-key.pem", "n2-key.pem", "gossip.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), f)
	}
	return dir
}

func secureArgs(dir, node string) []string {
	return []string{"--node-id", node,
		"--cluster-ca", filepath.Join(dir, "ca.pem"),
		"--cluster-cert", filepath.Join(dir, node+".pem"),
		"--cluster-key", filepath.Join(dir, node+"-key.pem"),
		"--gossip-key", filepath.Join(dir, "gossip.key")}
}

// TestServeIsSecureByDefault: a node that joins others or listens beyond
// loopback refuses to start without cluster TLS and a gossip key, before it
// opens anything; --insecure lets it, and it says so in its log.
func TestServeIsSecureByDefault(t *testing.T) {
	dir := certsInit(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"join", []string{"--join", "127.0.0.1:1"}, "--insecure"},
		{"raft on every address", []string{"--raft-addr", "0.0.0.0:0"}, "--insecure"},
		{"gossip beyond loopback", []string{"--gossip-addr", "192.0.2.1:7072"}, "--insecure"},
		{"certificates without a gossip key", append(secureArgs(dir, "n1")[:8], "--join", "127.0.0.1:1"), "--insecure"},
		{"half the TLS flags", []string{"--cluster-ca", filepath.Join(dir, "ca.pem")}, "go together"},
		{"another node's certificate", append(secureArgs(dir, "n2"), "--node-id", "n1"), `not for this node`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve", "--data-dir", t.TempDir(), "--http-addr", freeport.Addr(t)}, tt.args...)
			err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	// --insecure: a plain node joins a plain one, and warns at start.
	_, gossip, _ := serveNode(t, "--node-id", "p1")
	_, _, logs := serveNode(t, "--node-id", "p2", "--join", gossip, "--insecure")
	assert.Contains(t, logs.String(), "INSECURE")
}

// TestServeSecureCluster: two nodes started the secure way, with what
// `quorate certs init` wrote, form one cluster.
func TestServeSecureCluster(t *testing.T) {
	dir := certsInit(t)
	c1, gossip, _ := serveNode(t, secureArgs(dir, "n1")...)
	_, _, logs := serveNode(t, append(secureArgs(dir, "n2"), "--join", gossip)...)
	waitVoters(t, c1, 2)
	assert.NotContains(t, logs.String(), "INSECURE")
	assert.False(t, strings.Contains(logs.String(), "failed to prove"), "n1 proved itself to n2:\n%s", logs.String())
}
