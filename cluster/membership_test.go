package cluster

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newTestMembership(t *testing.T, id, gossip string) *membership {
	t.Helper()
	m, err := newMembership(membershipConfig{nodeID: id, raftAddr: id + ":raft", httpAddr: id + ":http",
		gossipAddr: gossip, groups: 2, logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return m
}

func stateOf(m *membership, id string) memberState {
	return m.snapshot()[id].state
}

// TestReconnectRejoinsADeadMember restarts a member that the other saw
// die, without letting it join anyone: only the survivor's reconnect can
// bring the two back together.
func TestReconnectRejoinsADeadMember(t *testing.T) {
	addrB := freePort(t)
	a := newTestMembership(t, "a", "127.0.0.1:0")
	defer a.shutdown()
	b := newTestMembership(t, "b", addrB)
	require.NoError(t, b.join([]string{a.ml.LocalNode().Address()}))
	require.Eventually(t, func() bool { return stateOf(a, "b") == memberAlive }, 10*time.Second, 20*time.Millisecond)

	require.NoError(t, b.shutdown())
	require.Eventually(t, func() bool { return stateOf(a, "b") == "dead" }, 20*time.Second, 50*time.Millisecond,
		"a never noticed b die")

	b2 := newTestMembership(t, "b", addrB) // same name and address, joins no one
	defer b2.shutdown()
	require.Eventually(t, func() bool {
		a.reconnect()
		return stateOf(a, "b") == memberAlive && stateOf(b2, "a") == memberAlive
	}, 20*time.Second, 200*time.Millisecond, "reconnect did not rejoin the restarted member")
}
