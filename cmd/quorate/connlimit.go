package main

import (
	"net"
	"syscall"

	"github.com/quorate/quorate/internal/connlimit"
)

// Caps on the connections of the public ports, HTTP and gRPC, counted
// together (one connlimit.Counter). Each open connection holds a file
// descriptor and some memory: without a cap, idle connections from anyone
// who can reach the port used every descriptor the process had, and the
// raft port could accept no peer.
const defaultMaxHTTPConnsPerIP = 1024

// perConnMemory is what one open connection of the public ports may hold,
// its buffers and its goroutine's stack (measured while held idle: about
// 21 KiB plain, 39 KiB with TLS), rounded up.
const perConnMemory = 40 << 10

// defaultMaxHTTPConns is half of the process's file descriptors (Go raises
// the soft limit to the hard one at start), at most 16,384, so that the
// other half stays for the raft port, the log files and gossip; and, for a
// memory budget of budget bytes (none if 0 or less), no more than a tenth
// of it holds at perConnMemory a connection, at least 64. Connections are
// not state the budget can shed, so their cap keeps them a small share of
// it: on a small machine 16,384 TLS connections alone would be 640 MiB.
func defaultMaxHTTPConns(budget int64) int {
	n := 1024
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err == nil && l.Cur > 0 {
		n = int(min(l.Cur/2, 16384))
	}
	if budget > 0 {
		n = min(n, int(max(budget/10/perConnMemory, 64)))
	}
	return n
}

// limitListener admits connections within a connlimit.Counter's caps; one
// beyond is closed as soon as it is accepted (so that the kernel's backlog
// never fills).
type limitListener struct {
	net.Listener
	caps *connlimit.Counter
}

func newLimitListener(ln net.Listener, caps *connlimit.Counter) *limitListener {
	return &limitListener{Listener: ln, caps: caps}
}

// Accept returns the next connection within the caps.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := connlimit.RemoteIP(c)
		if !l.caps.Admit(ip) {
			_ = c.Close()
			continue
		}
		return l.caps.Wrap(c, ip), nil
	}
}
