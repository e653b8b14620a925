package main

import (
	"net"
	"syscall"

	"github.com/quorate/quorate/internal/connlimit"
)

// Caps on the connections of the public ports, HTTP and gRPC, counted
// together (one connlimit.Counter). Each open connection holds a file
// descriptor and some memory (about 19 KiB plain, 39 KiB with TLS): without
// a cap, idle connections from anyone who can reach the port used every
// descriptor the process had, and the raft port could accept no peer.
const defaultMaxHTTPConnsPerIP = 1024

// defaultMaxHTTPConns is half of the process's file descriptors (Go raises
// the soft limit to the hard one at start), at most 16,384, so that the
// other half stays for the raft port, the log files and gossip.
func defaultMaxHTTPConns() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur == 0 {
		return 1024
	}
	return int(min(l.Cur/2, 16384))
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
