//go:build linux

package control

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/internal/clusterview"
)

// testCluster is a Cluster that is never set up: its binary is a stub and
// useNS is forced, so the pure parts can be checked as any user.
func testCluster(t *testing.T, nodes int, netns bool, extra ...string) *Cluster {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "quorate")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755))
	c, err := New(Options{Nodes: nodes, Binary: bin, UpgradeBinary: bin + "-next", WorkDir: "/w", ExtraArgs: extra})
	require.NoError(t, err)
	c.useNS = netns
	return c
}

func TestNewChecksOptions(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "quorate")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	plain := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, os.WriteFile(plain, nil, 0o644))
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"nodes", Options{Nodes: 4, Binary: bin, WorkDir: "/w"}, "Nodes must be 3 or 5"},
		{"no binary", Options{Nodes: 3, WorkDir: "/w"}, "Binary is required"},
		{"missing binary", Options{Nodes: 3, Binary: bin + "-nope", WorkDir: "/w"}, "no such file"},
		{"not executable", Options{Nodes: 3, Binary: plain, WorkDir: "/w"}, "not an executable"},
		{"no workdir", Options{Nodes: 3, Binary: bin}, "WorkDir is required"},
		{"prefix", Options{Nodes: 3, Binary: bin, WorkDir: "/w", Prefix: "Q-1"}, "Prefix"},
		{"long prefix", Options{Nodes: 3, Binary: bin, WorkDir: "/w", Prefix: "abcdefghi"}, "Prefix"},
		{"replicas", Options{Nodes: 3, Binary: bin, WorkDir: "/w", ExtraArgs: []string{"--replicas"}}, "--replicas"},
	}
	for _, tt := range tests {
		_, err := New(tt.opts)
		if assert.Error(t, err, tt.name) {
			assert.Contains(t, err.Error(), tt.want, tt.name)
		}
	}

	c, err := New(Options{Nodes: 5, Binary: bin, WorkDir: "/w"})
	require.NoError(t, err)
	assert.Equal(t, DefaultPrefix, c.opts.Prefix)
	assert.Equal(t, DefaultClockSkew, c.opts.ClockSkew)
	assert.Equal(t, DefaultLeaderGroup, c.opts.LeaderGroup)
	assert.Equal(t, 3, c.voters)
}

func TestVotersPerGroup(t *testing.T) {
	tests := []struct {
		extra []string
		nodes int
		want  int
	}{
		{nil, 3, 3},
		{nil, 5, 3},
		{[]string{"--groups", "8"}, 5, 3},
		{[]string{"--replicas", "5"}, 5, 5},
		{[]string{"--replicas=5"}, 3, 3},
		{[]string{"-replicas=1", "--groups", "4"}, 3, 1},
	}
	for _, tt := range tests {
		got, err := votersPerGroup(tt.extra, tt.nodes)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, "votersPerGroup(%q, %d)", tt.extra, tt.nodes)
	}
	_, err := votersPerGroup([]string{"--replicas=x"}, 3)
	assert.Error(t, err)

	for extra, want := range map[string]int{"": 8, "--groups 4": 4, "--groups=2": 2, "-groups 3 --replicas 5": 3} {
		got, err := intFlag(strings.Fields(extra), "groups", 8)
		require.NoError(t, err)
		assert.Equal(t, want, got, "groups in %q", extra)
	}
	_, err = intFlag([]string{"--groups"}, "groups", 8)
	assert.ErrorContains(t, err, "without a value")
}

func TestLayout(t *testing.T) {
	ns := testCluster(t, 5, true)
	assert.Equal(t, "10.77.0.11", ns.NodeIP(1))
	assert.Equal(t, "10.77.0.15", ns.NodeIP(5))
	assert.Equal(t, "10.77.0.100", ns.ClientIP())
	assert.Equal(t, "http://10.77.0.13:7070", ns.NodeURL(3))
	assert.Equal(t, "http://10.77.0.13:7079", ns.DebugURL(3))
	assert.Equal(t, []string{"qj-br", "qj-client", "qj-n1", "qj-n2", "qj-n3", "qj-n4", "qj-n5"}, ns.namespaces())
	assert.Equal(t, "/w/n2", ns.DataDir(2))
	assert.Equal(t, "/w/n2.log", ns.LogPath(2))

	lo := testCluster(t, 3, false)
	assert.Equal(t, "127.0.0.12", lo.NodeIP(2))
	assert.Equal(t, "http://127.0.0.12:7070", lo.NodeURL(2))
	assert.Equal(t, "", lo.NodeNS(2))
	assert.Equal(t, "", lo.ClientIP())
}

func TestNetworkCommands(t *testing.T) {
	c := testCluster(t, 3, true)
	var lines []string
	for _, args := range c.networkCommands() {
		lines = append(lines, strings.Join(args, " "))
	}
	assert.Equal(t, []string{"-n qj-br link set lo up", "-n qj-br link add br0 type bridge", "-n qj-br link set br0 up"}, lines[:3])
	for _, want := range []string{
		"-n qj-br link add v-client type veth peer name eth0 netns qj-client",
		"-n qj-client addr add 10.77.0.100/24 dev eth0",
		"-n qj-br link add v-n2 type veth peer name eth0 netns qj-n2",
		"-n qj-br link set v-n2 master br0",
		"-n qj-br link set v-n2 up",
		"-n qj-n2 addr add 10.77.0.12/24 dev eth0",
		"-n qj-n2 link set eth0 up",
		"-n qj-n2 link set lo up",
	} {
		assert.Contains(t, lines, want)
	}
	assert.Len(t, lines, 3+6*4)
}

func TestCommand(t *testing.T) {
	ns := testCluster(t, 3, true, "--groups", "4")
	bin := ns.opts.Binary
	insecure := testCluster(t, 3, false)
	insecure.opts.Insecure = true
	// sec is a node's security flags: the files Setup's certs init writes.
	sec := func(id string) string {
		return "--cluster-ca /w/certs/ca.pem --cluster-cert /w/certs/" + id + ".pem --cluster-key /w/certs/" + id + "-key.pem --gossip-key /w/certs/gossip.key"
	}
	tests := []struct {
		name      string
		c         *Cluster
		i         int
		bootstrap bool
		want      string
	}{
		{"node 1 bootstraps", ns, 1, true,
			"ip netns exec qj-n1 " + bin + " serve --node-id n1 --data-dir /w/n1 --http-addr 10.77.0.11:7070 --raft-addr 10.77.0.11:7071 --gossip-addr 10.77.0.11:7072 --debug-addr 10.77.0.11:7079 --auth-file /w/auth.json " + sec("n1") + " --groups 4"},
		{"node 1 restarts", ns, 1, false,
			"ip netns exec qj-n1 " + bin + " serve --node-id n1 --data-dir /w/n1 --http-addr 10.77.0.11:7070 --raft-addr 10.77.0.11:7071 --gossip-addr 10.77.0.11:7072 --debug-addr 10.77.0.11:7079 --auth-file /w/auth.json --join 10.77.0.12:7072,10.77.0.13:7072 " + sec("n1") + " --groups 4"},
		{"node 2 joins", ns, 2, false,
			"ip netns exec qj-n2 " + bin + " serve --node-id n2 --data-dir /w/n2 --http-addr 10.77.0.12:7070 --raft-addr 10.77.0.12:7071 --gossip-addr 10.77.0.12:7072 --debug-addr 10.77.0.12:7079 --auth-file /w/auth.json --join 10.77.0.11:7072,10.77.0.13:7072 " + sec("n2") + " --groups 4"},
		{"loopback", testCluster(t, 3, false), 3, false,
			"X serve --node-id n3 --data-dir /w/n3 --http-addr 127.0.0.13:7070 --raft-addr 127.0.0.13:7071 --gossip-addr 127.0.0.13:7072 --debug-addr 127.0.0.13:7079 --auth-file /w/auth.json --join 127.0.0.11:7072,127.0.0.12:7072 " + sec("n3")},
		{"insecure", insecure, 2, false,
			"X serve --node-id n2 --data-dir /w/n2 --http-addr 127.0.0.12:7070 --raft-addr 127.0.0.12:7071 --gossip-addr 127.0.0.12:7072 --debug-addr 127.0.0.12:7079 --auth-file /w/auth.json --join 127.0.0.11:7072,127.0.0.13:7072 --insecure"},
	}
	for _, tt := range tests {
		got := tt.c.command(tt.i, tt.bootstrap)
		want := strings.Replace(tt.want, "X ", tt.c.opts.Binary+" ", 1)
		assert.Equal(t, want, strings.Join(got, " "), tt.name)
	}
}

func TestHasState(t *testing.T) {
	dir := t.TempDir()
	assert.False(t, hasState(dir), "empty dir")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "groups", "meta"), 0o755))
	assert.False(t, hasState(dir), "dirs only")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "groups", "meta", "raft.db"), nil, 0o644))
	assert.True(t, hasState(dir), "meta raft.db")
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "quorate.json"), []byte("{}"), 0o644))
	assert.True(t, hasState(other), "quorate.json")
}

func TestNodeEnvDropsQuorateVariables(t *testing.T) {
	t.Setenv("QUORATE_GROUPS", "99")
	t.Setenv("CONTROL_TEST_KEEP", "1")
	env := nodeEnv()
	assert.Contains(t, env, "CONTROL_TEST_KEEP=1")
	for _, kv := range env {
		assert.False(t, strings.HasPrefix(kv, "QUORATE_"), kv)
	}
}

func TestSupports(t *testing.T) {
	ns3, ns5, lo := testCluster(t, 3, true), testCluster(t, 5, true), testCluster(t, 3, false)
	for _, name := range NemesisNames() {
		assert.True(t, ns5.Supports(name), "5 nodes in namespaces: %s", name)
		assert.Equal(t, name != NemPartitionRing, ns3.Supports(name), "3 nodes in namespaces: %s", name)
		assert.Equal(t, !strings.HasPrefix(name, "partition-"), lo.Supports(name), "loopback: %s", name)
	}
	assert.False(t, ns5.Supports("flood"))
	plain, err := New(Options{Nodes: 3, Binary: "/bin/true", WorkDir: "/w"})
	require.NoError(t, err)
	assert.False(t, plain.Supports(NemUpgradeRoll), "nothing to upgrade to")
}

func TestCheckViews(t *testing.T) {
	lead := func(id string, term uint64, voters ...string) clusterview.Group {
		return clusterview.Group{ID: id, State: "Leader", Term: term, Voters: voters}
	}
	follow := func(id, leader string) clusterview.Group {
		return clusterview.Group{ID: id, State: "Follower", Leader: leader}
	}
	ready := map[int]clusterview.View{
		1: {NodeID: "n1", Groups: []clusterview.Group{lead("meta", 2, "n1", "n2", "n3"), follow("0", "n2")}},
		2: {NodeID: "n2", Groups: []clusterview.Group{follow("meta", "n1"), lead("0", 3, "n1", "n2", "n3")}},
	}
	assert.NoError(t, checkViews(ready, 3))
	assert.ErrorContains(t, checkViews(ready, 2), "voters")
	noLeader := map[int]clusterview.View{1: {Groups: []clusterview.Group{lead("meta", 2, "n1", "n2", "n3"), follow("0", "")}}}
	assert.ErrorContains(t, checkViews(noLeader, 3), "group 0: no leader")
	assert.Error(t, checkViews(map[int]clusterview.View{}, 3))

	// Two self-reported leaders: the higher term wins.
	split := map[int]clusterview.View{
		1: {Groups: []clusterview.Group{lead("0", 4, "n1", "n2", "n3")}},
		3: {Groups: []clusterview.Group{lead("0", 7, "n1", "n2", "n3")}},
	}
	assert.NoError(t, checkViews(split, 3))
	split[3].Groups[0].Voters = split[3].Groups[0].Voters[:2]
	assert.ErrorContains(t, checkViews(split, 3), "group 0: leader n3 has voters [n1 n2], want 3", "the leader of the higher term is the one checked")
}
