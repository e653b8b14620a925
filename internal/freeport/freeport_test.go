package freeport

import (
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAddrIsFreeAndOutsideTheEphemeralRange(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		addr := Addr(t)
		host, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1", host)
		p, err := strconv.Atoi(port)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, p, low)
		assert.Less(t, p, high)
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err, "Addr returned a port that cannot be bound")
		pc, err := net.ListenPacket("udp", addr)
		require.NoError(t, err)
		require.NoError(t, pc.Close())
		assert.False(t, free(addr), "a bound port must not count as free")
		require.NoError(t, ln.Close())
		seen[addr] = true
	}
	assert.Greater(t, len(seen), 1, "Addr must not return one port every time")
}

// No port is handed out twice, even though every one is free again once
// the caller has let it go: a server given an HTTP and a raft address from
// two calls must never be told one port for both.
func TestAddrNeverRepeatsAPort(t *testing.T) {
	seen := map[string]bool{}
	for range 2_000 {
		addr := Addr(t)
		require.False(t, seen[addr], "%s handed out twice", addr)
		seen[addr] = true
	}
}

// A port handed out stays reserved against other processes: its lock
// file cannot be locked again while this process lives.
func TestAddrHoldsThePortAgainstOtherProcesses(t *testing.T) {
	_, port, err := net.SplitHostPort(Addr(t))
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	f, err := os.Open(lockPath(p))
	require.NoError(t, err)
	defer f.Close()
	assert.Error(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), "another process could take the port")
}
