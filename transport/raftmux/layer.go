package raftmux

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// acceptBacklog is how many streams a layer queues for Accept. Beyond it,
// new streams are closed, so a layer whose owner stops accepting never
// blocks the Mux or the other layers.
const acceptBacklog = 64

var _ raft.StreamLayer = (*Layer)(nil)

// Layer is one destination on a [Mux]: a [raft.StreamLayer] and a
// [net.Listener] for the streams whose header names it, and a dialer of the
// same name on other nodes. All methods are safe for concurrent use.
type Layer struct {
	mux    *Mux
	name   string
	header []byte
	conns  chan net.Conn // streams waiting for Accept
	done   chan struct{} // closed by shutdown

	mu     sync.Mutex
	closed bool
}

func newLayer(m *Mux, name string) *Layer {
	return &Layer{
		mux:    m,
		name:   name,
		header: encodeHeader(name),
		conns:  make(chan net.Conn, acceptBacklog),
		done:   make(chan struct{}),
	}
}

// Name returns the name the layer was registered under.
func (l *Layer) Name() string { return l.name }

// Addr returns the Mux listener's address: the address other nodes dial to
// reach this layer, which raft uses as the local address.
func (l *Layer) Addr() net.Addr { return l.mux.Addr() }

// Accept waits for the next stream addressed to this layer, with its header
// already consumed. After Close (of the layer or of the Mux) it returns an
// error wrapping net.ErrClosed.
func (l *Layer) Accept() (net.Conn, error) {
	select {
	case conn := <-l.conns:
		return conn, nil
	case <-l.done:
		return nil, l.closedError("accept")
	}
}

// Close unregisters the layer: later streams for its name are refused, and
// streams queued but not yet accepted are closed. Streams already accepted
// or dialed stay open, and other layers are not affected. Later calls
// return nil.
func (l *Layer) Close() error {
	l.mux.unregister(l)
	l.shutdown()
	return nil
}

// shutdown closes the layer without touching the Mux's registry.
func (l *Layer) shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.done)
	for {
		select {
		case conn := <-l.conns:
			_ = conn.Close()
		default:
			return
		}
	}
}

// deliver queues conn for Accept, or closes it if the layer is closed or its
// queue is full. It never blocks.
func (l *Layer) deliver(conn net.Conn) {
	l.mu.Lock()
	closed, queued := l.closed, false
	if !closed {
		// Counted before the hand-over, not after: the layer's server may
		// answer on the stream before this goroutine runs again, and a
		// caller that saw the answer must see the stream counted.
		l.mux.counters.accepted.Add(1)
		select {
		case l.conns <- conn:
			queued = true
		default:
			l.mux.counters.accepted.Add(^uint64(0))
		}
	}
	l.mu.Unlock()
	if queued {
		return
	}
	_ = conn.Close()
	l.mux.counters.add(ReasonBacklog)
	remote := conn.RemoteAddr().String()
	if closed {
		l.mux.log.Debug("raftmux: stream refused", "remote", remote, "reason", "layer closed", "layer", l.name)
		return
	}
	l.mux.log.Warn("raftmux: stream refused", "remote", remote, "reason", "accept queue full",
		"layer", l.name, "backlog", acceptBacklog)
}

// Dial opens a stream to the layer of the same name on the Mux at address.
// A positive timeout bounds both the connect and the header write. It is
// DialContext over "tcp" with that timeout, for raft.StreamLayer.
func (l *Layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return l.DialContext(ctx, "tcp", string(address))
}

// DialContext opens a stream to the layer of the same name on the Mux at
// addr, completing the TLS handshake (if the Mux has TLS) and writing the
// header before it returns; ctx bounds all three. Its signature fits
// http.Transport.DialContext. After Close it fails with an error wrapping
// net.ErrClosed. With TLS, [PeerCertificate] of the stream is the verified
// certificate of the node that answered.
func (l *Layer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if l.isClosed() {
		return nil, l.closedError("dial " + addr)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("raftmux: layer %q: dial %s: %w", l.name, addr, err)
	}
	if t := l.mux.tls; t != nil {
		tc := tls.Client(conn, clientConfig(t.Client, addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("raftmux: layer %q: dial %s: tls: %w", l.name, addr, err)
		}
		conn = tc
	}
	if err := l.writeHeader(ctx, conn); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("raftmux: layer %q: dial %s: write header: %w", l.name, addr, err)
	}
	return conn, nil
}

// writeHeader writes the layer's header to conn within ctx.
func (l *Layer) writeHeader(ctx context.Context, conn net.Conn) error {
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetWriteDeadline(deadline); err != nil {
			return err
		}
	}
	// A cancelled ctx unblocks the write by moving the deadline to the past.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := conn.Write(l.header)
	if !stop() {
		// ctx ended during the write; the conn's deadline is no longer ours
		// to clear, so the caller must close it.
		return errors.Join(context.Cause(ctx), err)
	}
	if err != nil {
		return err
	}
	return conn.SetWriteDeadline(time.Time{})
}

// clientConfig is c, with ServerName set to addr's host if c verifies host
// names and names none.
func clientConfig(c *tls.Config, addr string) *tls.Config {
	if c.ServerName != "" || c.InsecureSkipVerify {
		return c
	}
	c = c.Clone()
	c.ServerName, _, _ = net.SplitHostPort(addr)
	return c
}

// PeerCertificate returns the certificate the other end of a TLS stream
// presented (verified by the handshake), or nil for a plain stream. conn
// may wrap the stream in types with a NetConn method, as tls.Conn does.
func PeerCertificate(conn net.Conn) *x509.Certificate {
	for range 8 { // wrappers nest a few deep at most
		switch c := conn.(type) {
		case interface{ ConnectionState() tls.ConnectionState }:
			if cs := c.ConnectionState(); len(cs.PeerCertificates) > 0 {
				return cs.PeerCertificates[0]
			}
			return nil
		case interface{ NetConn() net.Conn }:
			conn = c.NetConn()
		default:
			return nil
		}
	}
	return nil
}

func (l *Layer) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

func (l *Layer) closedError(op string) error {
	return fmt.Errorf("raftmux: layer %q: %s: %w", l.name, op, net.ErrClosed)
}
