package membership

import (
	"errors"
	"fmt"
	"log"
	"net"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/memberlist"
)

// Limits on gossip's TCP streams, which memberlist reads whole (up to 20
// MiB each, with no cap on how many) before it can check the gossip key: a
// stranger could otherwise fill a node's memory from the gossip port. Our
// streams are push/pull exchanges of every member's state, a few hundred
// bytes a member, one per member every few seconds.
const (
	// MaxStreamBytes is the most a node reads of one incoming stream: the
	// state of about 400 members.
	MaxStreamBytes = 256 << 10
	// MaxStreams and MaxStreamsPerIP bound the incoming streams open at
	// once, in all and from one address. memberlist closes each within its
	// TCP timeout (10 s).
	MaxStreams      = 32
	MaxStreamsPerIP = 4
)

// errStreamTooLong ends the read of a stream past MaxStreamBytes.
var errStreamTooLong = errors.New("gossip stream longer than the limit")

// StreamStats counts what boundedTransport did with incoming streams.
type StreamStats struct {
	Accepted, Refused, Truncated uint64
	// Open is how many admitted streams are open, and PeakOpen the most
	// that ever were at once.
	Open, PeakOpen int
}

// boundedTransport is memberlist's NetTransport with incoming streams
// admitted only within MaxStreams, MaxStreamsPerIP and MaxStreamBytes.
// UDP packets need no such bound: the NetTransport reads one 64 KiB packet
// at a time and hands it over before it reads the next.
type boundedTransport struct {
	*memberlist.NetTransport
	streams chan net.Conn
	done    chan struct{}
	stop    sync.Once
	logger  *log.Logger

	mu     sync.Mutex
	open   int
	peak   int
	perIP  map[string]int
	counts struct{ accepted, refused, truncated atomic.Uint64 }
}

var _ memberlist.NodeAwareTransport = (*boundedTransport)(nil)

func newBoundedTransport(host string, port int, logger *log.Logger) (*boundedTransport, error) {
	inner, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("gossip transport: %w", err)
	}
	t := &boundedTransport{
		NetTransport: inner,
		streams:      make(chan net.Conn),
		done:         make(chan struct{}),
		logger:       logger,
		perIP:        map[string]int{},
	}
	go t.admit()
	return t, nil
}

// StreamCh returns the streams admitted.
func (t *boundedTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown shuts the NetTransport down, then stops admitting streams. The
// order matters: the NetTransport's listener hands each accepted stream
// over before it can see that it is shutting down, so admit must take
// them until it has stopped.
func (t *boundedTransport) Shutdown() error {
	err := t.NetTransport.Shutdown()
	t.stop.Do(func() { close(t.done) })
	return err
}

func (t *boundedTransport) admit() {
	for {
		var conn net.Conn
		select {
		case conn = <-t.NetTransport.StreamCh():
		case <-t.done:
			return
		}
		ip := remoteIP(conn)
		t.mu.Lock()
		ok := t.open < MaxStreams && t.perIP[ip] < MaxStreamsPerIP
		if ok {
			t.open++
			t.peak = max(t.peak, t.open)
			t.perIP[ip]++
		}
		t.mu.Unlock()
		if !ok {
			t.counts.refused.Add(1)
			_ = conn.Close()
			continue
		}
		t.counts.accepted.Add(1)
		bc := &boundedConn{Conn: conn, left: MaxStreamBytes, t: t, ip: ip}
		select {
		case t.streams <- bc:
		case <-t.done:
			_ = bc.Close()
			return
		}
	}
}

// Stats returns the stream counts so far.
func (t *boundedTransport) Stats() StreamStats {
	t.mu.Lock()
	open, peak := t.open, t.peak
	t.mu.Unlock()
	return StreamStats{Accepted: t.counts.accepted.Load(), Refused: t.counts.refused.Load(), Truncated: t.counts.truncated.Load(),
		Open: open, PeakOpen: peak}
}

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	return host
}

// boundedConn is an admitted stream: it reads at most MaxStreamBytes and
// gives its slot back when closed.
type boundedConn struct {
	net.Conn
	left   int
	t      *boundedTransport
	ip     string
	closed sync.Once
}

func (c *boundedConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.t.counts.truncated.Add(1)
		return 0, errStreamTooLong
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= n
	return n, err
}

func (c *boundedConn) Close() error {
	c.closed.Do(func() {
		c.t.mu.Lock()
		c.t.open--
		if c.t.perIP[c.ip]--; c.t.perIP[c.ip] <= 0 {
			delete(c.t.perIP, c.ip)
		}
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}
