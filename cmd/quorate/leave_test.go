package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
)

func TestWaitingFor(t *testing.T) {
	st := api.ClusterStatus{NodeID: "n2", Groups: []api.GroupStatus{
		{ID: "meta", State: "Leader", Voters: []string{"n1", "n2"}},
		{ID: "0", State: "Follower", Voters: []string{"n1", "n2"}},
		{ID: "1", State: "Follower", Voters: []string{"n1"}},
		{ID: "2", State: "Leader", Voters: []string{"n2"}},
		{ID: "3", State: "Follower", Voters: []string{"n2", "n1"}},
	}}
	assert.Equal(t, "handing over the leadership of groups meta and 2; waiting for the leaders of groups 0 and 3 to remove it", waitingFor(st))
	st.Groups = st.Groups[1:2]
	assert.Equal(t, "waiting for the leader of group 0 to remove it", waitingFor(st))
	st.Groups[0].Voters = []string{"n1"}
	assert.Contains(t, waitingFor(st), "in no group's voters")
}

// quorate leave on the second node of two: it says what it waits for
// while it hands over, and the first node goes on alone.
func TestLeaveShowsWhatItWaitsFor(t *testing.T) {
	dir := certsInit(t)
	c1, gossip, _ := serveNode(t, secureArgs(dir, "n1")...)
	c2, _, _ := serveNode(t, append(secureArgs(dir, "n2"), "--join", gossip)...)
	waitVoters(t, c1, 2)

	var out, progress bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"leave", "--addr", c2.URL(), "--timeout", "30s"}, &out, &progress))
	assert.Contains(t, out.String(), "node left the cluster and stopped")
	t.Logf("quorate leave printed:\n%s", progress.String())
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	require.NotEmpty(t, lines[0], "no progress printed")
	assert.Regexp(t, `^\s*\d+\.\ds  (handing over|waiting for|in no group)`, lines[0])
	require.Eventually(t, func() bool { return c2.Ready(context.Background()) != nil }, 10*time.Second, 10*time.Millisecond, "n2 did not stop")
	waitVoters(t, c1, 1)
}
