// Package freeport hands tests a loopback address to give a server that
// must be told its address before it starts (a gossip or Raft address that
// other nodes join, a child process's flags).
//
// The usual trick, listening on port 0 and closing, returns a port from the
// kernel's ephemeral range, which every outgoing connection and every other
// port-0 listener on the machine draws from too; with many test packages
// running at once, one of them takes the port before the server binds it.
// Addr draws from below that range instead, where neither ever lands, and
// checks the port is free for both TCP and UDP (memberlist binds both).
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// The range Addr draws from: above the well-known and most registered
// service ports, below Linux's default ephemeral range (32768-60999).
const (
	low  = 20000
	high = 32768
)

// given is every port Addr has handed out in this process: a test asks
// for several addresses before its server binds any (HTTP, raft, gossip),
// so each must differ from the others, not only be free.
var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Addr returns "127.0.0.1:port" for a port that was free for TCP and UDP a
// moment ago, that the kernel does not hand out on its own, and that no
// earlier call in this process returned.
func Addr(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	for range 100 {
		port := low + rand.IntN(high-low)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if !given[port] && free(addr) {
			given[port] = true
			return addr
		}
	}
	t.Fatal("freeport: no free port in 100 tries")
	return ""
}

func free(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	return pc.Close() == nil
}
