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
//
// Test packages run as separate processes, and two of them drawing the
// same port between check and bind was a real failure (a client test's
// gossip listener, in a fresh-clone CI run). So each port handed out is
// also held, for the life of the process, by an flock on a file of its
// own under the temporary directory; the kernel lets the lock go when the
// process ends, however it ends.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
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
		if !given[port] && hold(port) && free(addr) {
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

// held keeps open the files whose locks reserve this process's ports.
var held []*os.File

// hold reserves port against every other process that uses Addr, or
// reports that one holds it already.
func hold(port int) bool {
	f, err := os.OpenFile(lockPath(port), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		_ = f.Close()
		return false
	}
	held = append(held, f)
	return true
}

func lockPath(port int) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("quorate-freeport-%d.lock", port))
}
