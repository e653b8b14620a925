package membership

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newTestMembership(t *testing.T, id, gossip string) *Gossip {
	t.Helper()
	m, err := New(Config{NodeID: id, RaftAddr: id + ":raft", HTTPAddr: id + ":http",
		GossipAddr: gossip, Groups: 2, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return m
}

func stateOf(m *Gossip, id string) State {
	return m.Snapshot()[id].State
}

// TestReconnectRejoinsADeadMember restarts a member that the other saw
// die, without letting it join anyone: only the survivor's reconnect can
// bring the two back together.
func TestReconnectRejoinsADeadMember(t *testing.T) {
	a := newTestMembership(t, "a", "127.0.0.1:0")
	defer a.Shutdown()
	b := newTestMembership(t, "b", "127.0.0.1:0")
	addrB := b.Addr() // b2 takes it over once b is gone
	require.NoError(t, b.Join([]string{a.Addr()}))
	require.Eventually(t, func() bool { return stateOf(a, "b") == Alive }, 10*time.Second, 20*time.Millisecond)

	require.NoError(t, b.Shutdown())
	require.Eventually(t, func() bool { return stateOf(a, "b") == "dead" }, 20*time.Second, 50*time.Millisecond,
		"a never noticed b die")

	b2 := newTestMembership(t, "b", addrB) // same name and address, joins no one
	defer b2.Shutdown()
	require.Eventually(t, func() bool {
		a.Reconnect()
		return stateOf(a, "b") == Alive && stateOf(b2, "a") == Alive
	}, 20*time.Second, 200*time.Millisecond, "reconnect did not rejoin the restarted member")
}
