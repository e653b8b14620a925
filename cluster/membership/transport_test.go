package membership

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The gossip port's memory attack: 100 connections from as many addresses,
// each announcing a 20 MiB encrypted message (memberlist buffers up to that
// much before it can check the key) and sending 2 MiB of it, without the
// key. Unbounded, the node held over 200 MiB for memberlist's TCP timeout;
// now each address gets at most MaxStreamsPerIP streams, the port at most
// MaxStreams, each read stops at MaxStreamBytes, and the members keep
// gossiping.
func TestGossipPortBoundsStreamsBeforeTheKey(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	start := func(id string) *Gossip {
		m, err := New(Config{NodeID: id, RaftAddr: id + ":raft", HTTPAddr: id + ":http", GossipAddr: "127.0.0.1:0",
			Groups: 2, Keys: [][]byte{key}, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Shutdown() })
		return m
	}
	a, b := start("a"), start("b")
	require.NoError(t, b.Join([]string{a.Addr()}))
	require.Eventually(t, func() bool { return stateOf(a, "b") == Alive }, 10*time.Second, 20*time.Millisecond)

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	const attackers, perConn = 100, 2 << 20
	header := []byte{10} // memberlist's encryptMsg
	header = binary.BigEndian.AppendUint32(header, 20<<20)
	junk := bytes.Repeat([]byte{0x5a}, perConn)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	for i := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.1.%d", i+1))}}
			c, err := d.Dial("tcp", a.Addr())
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			_, _ = c.Write(append(header, junk...)) // fails once the node stops reading
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	// Every attacking connection is still open on our side: once the node
	// has taken each from its listener, whatever it buffered for them it
	// holds now.
	require.Eventually(t, func() bool {
		st := a.StreamStats()
		return st.Admitted+st.Refused >= uint64(len(conns))
	}, 30*time.Second, 10*time.Millisecond, "the node never took every connection: %+v", a.StreamStats())
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %.1f MiB under %d connections of %d MiB; streams %+v", float64(grew)/(1<<20), attackers, perConn>>20, a.StreamStats())

	st := a.StreamStats()
	assert.Less(t, grew, int64(50<<20), "the attack took memory")
	assert.LessOrEqual(t, st.Peak, MaxStreams, "streams open at once beyond the cap")
	assert.Positive(t, st.Truncated, "no stream was cut at MaxStreamBytes")
	assert.Equal(t, Alive, stateOf(a, "b"), "gossip between the members went on")
	assert.Equal(t, Alive, stateOf(b, "a"))
}

// A stream that announces more than MaxStreamBytes in its header is cut
// before memberlist reads what follows it: of 1 MiB sent, the node takes
// at most one read's worth.
func TestGossipPortCutsStreamsAnnouncingTooMuch(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	a, err := New(Config{NodeID: "a", RaftAddr: "a:raft", HTTPAddr: "a:http", GossipAddr: "127.0.0.1:0",
		Groups: 2, Keys: [][]byte{key}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer a.Shutdown()
	c, err := net.Dial("tcp", a.Addr())
	require.NoError(t, err)
	defer c.Close()
	header := binary.BigEndian.AppendUint32([]byte{10}, MaxStreamBytes+1) // memberlist's encryptMsg
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Write(header)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return a.StreamStats().Truncated == 1 }, 5*time.Second, 5*time.Millisecond,
		"cut at its header: %+v", a.StreamStats())
	// The node closes it (after memberlist's error answer): the read ends
	// well before the deadline.
	_, err = io.Copy(io.Discard, c)
	assert.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the node closed the stream: %v", err)
	assert.Equal(t, uint64(1), a.StreamStats().Truncated)
}

// One address never holds more than MaxStreamsPerIP streams.
func TestGossipPortCapsStreamsPerAddress(t *testing.T) {
	a := newTestMembership(t, "a", "127.0.0.1:0")
	defer a.Shutdown()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range 3 * MaxStreamsPerIP {
		c, err := net.Dial("tcp", a.Addr())
		require.NoError(t, err)
		conns = append(conns, c)
	}
	require.Eventually(t, func() bool {
		st := a.StreamStats()
		return st.Admitted+st.Refused == uint64(len(conns))
	}, 5*time.Second, 5*time.Millisecond)
	st := a.StreamStats()
	assert.Equal(t, uint64(MaxStreamsPerIP), st.Admitted)
	assert.Equal(t, MaxStreamsPerIP, st.Open)
	assert.Equal(t, uint64(2*MaxStreamsPerIP), st.Refused)
	for _, c := range conns {
		_ = c.Close()
	}
	require.Eventually(t, func() bool { return a.StreamStats().Open == 0 }, 15*time.Second, 10*time.Millisecond,
		"closed streams give their slots back")
}
