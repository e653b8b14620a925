package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"net"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/memberlist"

	"github.com/quorate/quorate/internal/connlimit"
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

// StreamStats counts what boundedTransport did with incoming streams:
// Admitted and Refused by the caps, Truncated at MaxStreamBytes, Open now
// and the most at once (Peak).
type StreamStats struct {
	Admitted, Refused, Truncated uint64
	Open, Peak                   int
}

// boundedTransport is memberlist's NetTransport with incoming streams
// admitted only within MaxStreams, MaxStreamsPerIP and MaxStreamBytes.
// UDP packets need no such bound: the NetTransport reads one 64 KiB packet
// at a time and hands it over before it reads the next.
type boundedTransport struct {
	*memberlist.NetTransport
	streams   chan net.Conn
	done      chan struct{}
	stop      sync.Once
	caps      *connlimit.Counter
	truncated atomic.Uint64
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
		caps:         connlimit.New(MaxStreams, MaxStreamsPerIP),
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
		ip := connlimit.RemoteIP(conn)
		if !t.caps.Admit(ip) {
			_ = conn.Close()
			continue
		}
		bc := &boundedConn{Conn: t.caps.Wrap(conn, ip), left: MaxStreamBytes, truncated: &t.truncated}
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
	c := t.caps.Stats()
	return StreamStats{Admitted: c.Admitted, Refused: c.Refused, Truncated: t.truncated.Load(), Open: c.Open, Peak: c.Peak}
}

// boundedConn is an admitted stream: it reads at most MaxStreamBytes (its
// place in the caps is given back when it is closed). An encrypted stream
// says how long it is in its first five bytes (memberlist's encryptMsg
// type and a 4-byte length): one that announces more than the limit ends
// there, before memberlist reads any of it.
type boundedConn struct {
	*connlimit.Conn
	left      int
	truncated *atomic.Uint64
	head      []byte // the stream's first bytes, until there are five
}

// encryptMsg is memberlist's message type of an encrypted stream.
const encryptMsg = 10

func (c *boundedConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.truncated.Add(1)
		return 0, errStreamTooLong
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= n
	if len(c.head) < 5 {
		c.head = append(c.head, p[:min(n, 5-len(c.head))]...)
		if len(c.head) == 5 && c.head[0] == encryptMsg && binary.BigEndian.Uint32(c.head[1:]) > MaxStreamBytes {
			c.left = 0 // the next read ends the stream
		}
	}
	return n, err
}
