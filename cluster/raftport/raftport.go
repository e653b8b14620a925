// Package raftport is the node's side of its raft port (transport/raftmux):
// the mux's limits and TLS for a node of so many groups (MuxOptions), the
// address it advertises (Advertised), the stream layers it listens and dials
// on (Layer: raft traffic, the internal RPC), and the partition table tests
// cut links with (Partition).
package raftport

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/transport/peertls"
	"github.com/quorate/quorate/transport/raftmux"
)

// RaftLayer is the raft port's stream name for every group's raft traffic
// (transport/raftnet).
const RaftLayer = "raft"

// MuxOptions configures the raft port: mutual TLS if the node has cluster
// TLS, and limits that leave room for every peer's streams. A peer opens,
// per group whose leader it is, a heartbeat stream and up to three for
// replication (raft's MaxPool), plus up to 64 pooled internal RPC streams:
// the per-address cap is several times that, and a flood from one address
// (or of connections that never finish their handshake, from anywhere)
// cannot take the streams real peers need.
func MuxOptions(groups int, tls *peertls.Config, logger *slog.Logger) raftmux.Options {
	perIP := max(raftmux.DefaultMaxStreamsPerIP, 8*(groups+1)+128)
	mo := raftmux.Options{
		Logger:          logger.With("component", "raftmux"),
		MaxStreamsPerIP: perIP,
		MaxStreams:      max(raftmux.DefaultMaxStreams, 4*perIP),
	}
	if tls != nil {
		mo.TLS = &raftmux.TLS{Server: tls.Server, Client: tls.Client}
	}
	return mo
}

// Advertised is the address peers use: the configured one, or the bound
// one when the configured port asked for any port (0 however spelled, or
// empty, as net.Listen reads it) or there is none.
func Advertised(configured string, bound net.Addr) string {
	if _, port, err := net.SplitHostPort(configured); err == nil && port != "" {
		if n, err := strconv.Atoi(port); err != nil || n != 0 {
			return configured // a named or numbered port: peers dial what was configured
		}
	}
	return bound.String()
}

// Layer is a raftmux layer that reports the node's advertised address
// (what peers must dial, not what it bound) and, in tests, obeys a
// partition table.
type Layer struct {
	*raftmux.Layer
	self      string
	addr      net.Addr
	partition *Partition
}

var _ raft.StreamLayer = (*Layer)(nil)

// NewLayer wraps l, a layer of the node whose advertised raft address is
// self; p (nil in production) cuts its links.
func NewLayer(l *raftmux.Layer, self string, p *Partition) *Layer {
	return &Layer{Layer: l, self: self, addr: advertisedAddr(self), partition: p}
}

type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// Addr returns the advertised address.
func (s *Layer) Addr() net.Addr { return s.addr }

// Dial implements raft.StreamLayer; a timeout of 0 is none, as for raft's
// own stream layers.
func (s *Layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return s.DialContext(ctx, "tcp", string(address))
}

// DialContext dials a peer's layer of the same name.
func (s *Layer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
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
