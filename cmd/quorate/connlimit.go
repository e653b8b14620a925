package main

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// Caps on the HTTP port's connections. Each open connection holds a file
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

// limitListener admits at most max connections at once, and at most perIP
// from one address; one beyond is closed as soon as it is accepted (so that
// the kernel's backlog never fills), and counted in refused.
type limitListener struct {
	net.Listener
	max, perIP int

	mu      sync.Mutex
	open    int
	byIP    map[string]int
	refused atomic.Uint64
}

func newLimitListener(ln net.Listener, max, perIP int) *limitListener {
	return &limitListener{Listener: ln, max: max, perIP: perIP, byIP: map[string]int{}}
}

// Accept returns the next connection within the caps.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := c.RemoteAddr().String()
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			ip = a.IP.String()
		}
		l.mu.Lock()
		ok := l.open < l.max && l.byIP[ip] < l.perIP
		if ok {
			l.open++
			l.byIP[ip]++
		}
		l.mu.Unlock()
		if !ok {
			l.refused.Add(1)
			_ = c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l, ip: ip}, nil
	}
}

// limitedConn gives its place back when closed.
type limitedConn struct {
	net.Conn
	l    *limitListener
	ip   string
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		if c.l.byIP[c.ip]--; c.l.byIP[c.ip] <= 0 {
			delete(c.l.byIP, c.ip)
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
