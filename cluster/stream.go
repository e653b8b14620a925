package cluster

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/transport/raftmux"
)

// streamLayer is a raftmux layer that reports the node's advertised
// address (what peers must dial, not what it bound) and, in tests, obeys a
// partition table.
type streamLayer struct {
	*raftmux.Layer
	self      string
	addr      net.Addr
	partition *Partition
}

var _ raft.StreamLayer = (*streamLayer)(nil)

type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// Addr returns the advertised address.
func (s *streamLayer) Addr() net.Addr { return s.addr }

// Dial implements raft.StreamLayer.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.DialContext(ctx, "tcp", string(address))
}

// DialContext dials a peer's layer of the same name.
func (s *streamLayer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.partition.Cut(s.self, addr) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("partitioned from %s", addr)}
	}
	c, err := s.Layer.DialContext(ctx, network, addr)
	if err != nil || s.partition == nil {
		return c, err
	}
	return &partitionedConn{Conn: c, p: s.partition, from: s.self, to: addr}, nil
}

// Partition is a table of cut links between nodes (by raft address), for
// tests that partition an in-process cluster. The zero value and a nil
// *Partition cut nothing. A cut link fails new dials and every read and
// write on connections already dialled across it, in both directions.
type Partition struct {
	mu       sync.Mutex
	isolated map[string]bool
}

// Isolate cuts every link to and from addr.
func (p *Partition) Isolate(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isolated == nil {
		p.isolated = map[string]bool{}
	}
	p.isolated[addr] = true
}

// Heal restores every link.
func (p *Partition) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isolated = nil
}

// Cut reports whether the link between a and b is cut.
func (p *Partition) Cut(a, b string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return a != b && (p.isolated[a] || p.isolated[b])
}

type partitionedConn struct {
	net.Conn
	p        *Partition
	from, to string
}

func (c *partitionedConn) Read(b []byte) (int, error) {
	if c.p.Cut(c.from, c.to) {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Read(b)
}

func (c *partitionedConn) Write(b []byte) (int, error) {
	if c.p.Cut(c.from, c.to) {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

// NetConn returns the wrapped stream, so that raftmux.PeerCertificate can
// see through the partition.
func (c *partitionedConn) NetConn() net.Conn { return c.Conn }
