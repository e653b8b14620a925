// Package connlimit counts what a listener holds open, in all and per
// remote address, and says whether one more may be admitted: the caps of
// the HTTP port (cmd/quorate) and of gossip's streams (cluster/membership).
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Counter admits at most Max at once and at most PerIP from one address.
// The zero value admits nothing; use New. It is safe for concurrent use.
type Counter struct {
	max, perIP int

	mu    sync.Mutex
	open  int
	peak  int
	byIP  map[string]int
	total atomic.Uint64 // admitted, ever
	refus atomic.Uint64 // refused, ever
}

// New returns a Counter of max in all and perIP per address.
func New(max, perIP int) *Counter {
	return &Counter{max: max, perIP: perIP, byIP: map[string]int{}}
}

// Stats is what a Counter did.
type Stats struct {
	Admitted, Refused uint64
	// Open is how many are held now, and Peak the most ever held at once.
	Open, Peak int
}

// Admit takes a place for a connection from ip, or reports false (and
// counts a refusal) if either cap is reached.
func (c *Counter) Admit(ip string) bool {
	c.mu.Lock()
	ok := c.open < c.max && c.byIP[ip] < c.perIP
	if ok {
		c.open++
		c.peak = max(c.peak, c.open)
		c.byIP[ip]++
	}
	c.mu.Unlock()
	if ok {
		c.total.Add(1)
	} else {
		c.refus.Add(1)
	}
	return ok
}

// Release gives back a place Admit took for ip.
func (c *Counter) Release(ip string) {
	c.mu.Lock()
	c.open--
	if c.byIP[ip]--; c.byIP[ip] <= 0 {
		delete(c.byIP, ip)
	}
	c.mu.Unlock()
}

// Stats returns the counts so far.
func (c *Counter) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Admitted: c.total.Load(), Refused: c.refus.Load(), Open: c.open, Peak: c.peak}
}

// RemoteIP is the address a connection's place is counted under.
func RemoteIP(conn net.Conn) string {
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
	return host
}

// Conn is an admitted connection that gives its place back when closed,
// once.
type Conn struct {
	net.Conn
	c    *Counter
	ip   string
	once sync.Once
}

// Wrap returns conn holding the place Admit took for ip.
func (c *Counter) Wrap(conn net.Conn, ip string) *Conn { return &Conn{Conn: conn, c: c, ip: ip} }

// Close closes the connection and gives its place back.
func (w *Conn) Close() error {
	w.once.Do(func() { w.c.Release(w.ip) })
	return w.Conn.Close()
}
