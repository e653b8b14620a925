package raftnet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Layer is where a Net accepts its peers' streams and dials its own: a
// [raftmux.Layer], or anything else with the same two halves.
type Layer interface {
	net.Listener
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Options tune a Net. Zero values take the defaults.
type Options struct {
	// Tick is how long a request without log entries may wait to share a
	// write with others to the same peer (default 20 ms): at least a
	// fifth of raft's HeartbeatTimeout, and well inside its
	// LeaderLeaseTimeout (see Coalescing in the package doc).
	Tick time.Duration
	// Timeout bounds a call that has no deadline of its own (default 10 s,
	// raft's NetworkTransport default); InstallSnapshot gets Timeout per
	// TimeoutScale bytes, at least Timeout.
	Timeout time.Duration
	// DialTimeout bounds dialling a peer, TLS handshake included (default 2 s).
	DialTimeout time.Duration
	// MaxFrame bounds one frame (default 256 MiB: a full AppendEntries of
	// large batches).
	MaxFrame int
	// Logger gets connection failures (default: discarded).
	Logger *slog.Logger
}

// TimeoutScale is the number of snapshot bytes per Options.Timeout an
// InstallSnapshot may take (raft's NetworkTransport uses the same figure).
const TimeoutScale = 256 << 10

// ErrClosed is returned by calls on a closed Net or Transport.
var ErrClosed = errors.New("raftnet: closed")

// ErrNotSent marks a failure that proves the request never left this node
// (the peer could not be dialled, or its connection had broken before the
// request was queued): the peer did nothing with it.
var ErrNotSent = errors.New("raftnet: not sent")

// RemoteError is the peer's answer that it could not serve a request: its
// handler (or raft) returned an error, whose text this carries.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return e.Msg }

// Handler serves a [Net.Call]: ctx ends at the caller's deadline or when
// the Net closes. An error is returned to the caller as its text.
type Handler func(ctx context.Context, body []byte) ([]byte, error)

// Net is a node's end of the shared connections: one dialled connection per
// peer it calls, carrying every group's requests, and the accepted
// connections of the peers that call it.
type Net struct {
	layer  Layer
	local  raft.ServerAddress
	opts   Options
	logger *slog.Logger
	stats  stats
	done   chan struct{}
	wg     sync.WaitGroup

	mu        sync.RWMutex
	closed    bool
	groups    map[string]*Transport
	handlers  map[string]Handler
	peers     map[string]*peer
	accepted  map[*serverConn]struct{}
	snapshots map[net.Conn]struct{} // accepted snapshot streams
}

// New starts a Net accepting on layer; local is the address peers dial to
// reach this node (raft's LocalAddr).
func New(layer Layer, local raft.ServerAddress, opts Options) *Net {
	opts.Tick = cmp.Or(opts.Tick, 20*time.Millisecond)
	opts.Timeout = cmp.Or(opts.Timeout, 10*time.Second)
	opts.DialTimeout = cmp.Or(opts.DialTimeout, 2*time.Second)
	opts.MaxFrame = cmp.Or(opts.MaxFrame, 256<<20)
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n := &Net{
		layer:     layer,
		local:     local,
		opts:      opts,
		logger:    logger,
		done:      make(chan struct{}),
		groups:    map[string]*Transport{},
		handlers:  map[string]Handler{},
		peers:     map[string]*peer{},
		accepted:  map[*serverConn]struct{}{},
		snapshots: map[net.Conn]struct{}{},
	}
	n.wg.Add(1)
	go n.accept()
	return n
}

// Transport registers group and returns its raft transport. Each group may
// be registered once at a time; closing the Transport frees the name.
func (n *Net) Transport(group string) (*Transport, error) {
	if group == "" || len(group) > maxName {
		return nil, fmt.Errorf("raftnet: group name %q: 1 to %d bytes", group, maxName)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	if _, ok := n.groups[group]; ok {
		return nil, fmt.Errorf("raftnet: group %q registered twice", group)
	}
	t := newTransport(n, group)
	n.groups[group] = t
	return t, nil
}

// Handle registers h for calls to method (1 to 255 bytes; it panics on
// another name, a programming error).
func (n *Net) Handle(method string, h Handler) {
	if method == "" || len(method) > maxName {
		panic(fmt.Sprintf("raftnet: method name %q: 1 to %d bytes", method, maxName))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.handlers[method] = h
}

// Call sends body to method on the node at addr and returns its answer. It
// is written at once (never held for the tick) and fails at ctx's end. An
// error wraps ErrNotSent if the request never left, is a *RemoteError if
// the handler failed, and otherwise leaves open whether the handler ran.
func (n *Net) Call(ctx context.Context, addr, method string, body []byte) ([]byte, error) {
	if method == "" || len(method) > maxName {
		return nil, fmt.Errorf("%w: method name %q: 1 to %d bytes", ErrNotSent, method, maxName)
	}
	p, err := n.peer(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	deadline, _ := ctx.Deadline()
	var out []byte
	err = p.call(ctx, nil, kindCall, method, deadline, false, func(b []byte) []byte { return append(b, body...) },
		func(resp []byte) error { out = append([]byte(nil), resp...); return nil })
	return out, err
}

// Close stops accepting, closes every connection and fails every call in
// flight with ErrClosed.
func (n *Net) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	close(n.done)
	peers := slices.Collect(maps.Values(n.peers))
	accepted := slices.Collect(maps.Keys(n.accepted))
	snapshots := slices.Collect(maps.Keys(n.snapshots))
	n.mu.Unlock()
	err := n.layer.Close()
	for _, p := range peers {
		p.close()
	}
	for _, c := range accepted {
		c.conn.Close()
	}
	for _, c := range snapshots {
		c.Close()
	}
	n.wg.Wait()
	return err
}

// peer returns the peer at addr, created on first use.
func (n *Net) peer(addr string) (*peer, error) {
	n.mu.RLock()
	p, ok := n.peers[addr]
	closed := n.closed
	n.mu.RUnlock()
	if ok {
		return p, nil
	}
	if closed {
		return nil, ErrClosed
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	if p, ok = n.peers[addr]; !ok {
		p = newPeer(n, addr)
		n.peers[addr] = p
	}
	return p, nil
}

// hurry makes group's requests already queued on any connection go at
// once (Transport.Hurry).
func (n *Net) hurry(group string) {
	n.mu.RLock()
	peers := slices.Collect(maps.Values(n.peers))
	n.mu.RUnlock()
	for _, p := range peers {
		p.mu.Lock()
		c := p.conn
		p.mu.Unlock()
		if c != nil {
			c.hurry(group)
		}
	}
}

func (n *Net) group(name string) *Transport {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.groups[name]
}

func (n *Net) handler(method string) Handler {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.handlers[method]
}

func (n *Net) unregister(t *Transport) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.groups[t.group] == t {
		delete(n.groups, t.group)
	}
}

// accept hands every accepted stream to its server until the layer closes.
func (n *Net) accept() {
	defer n.wg.Done()
	for {
		conn, err := n.layer.Accept()
		if err != nil {
			select {
			case <-n.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			n.logger.Warn("raftnet: accept failed; no longer accepting", "err", err)
			return
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.serve(conn)
		}()
	}
}

// Stats counts a Net's traffic since it started. Every field only ever
// grows (each is a counter of its own, never a difference of two), so
// they export as Prometheus counters as they are.
type Stats struct {
	// Requests is the number of request frames written, Writes the number
	// of writes that carried them: Requests/Writes is the coalescing
	// factor. Lazy counts the requests queued to wait for a tick, Urgent
	// the ones queued to go at once.
	Requests, Writes, Lazy, Urgent uint64
	// Served counts request frames received, ServedWrites the writes that
	// carried their responses.
	Served, ServedWrites uint64
	// Dials counts outgoing connections attempted, DialsOK the ones that
	// gave a connection and DialFailures the ones that failed.
	Dials, DialsOK, DialFailures uint64
	// CommitCapped counts AppendEntries requests received whose commit
	// index ran past their last entry and was lowered to it (capCommit).
	CommitCapped uint64
}

type stats struct {
	requests, writes, lazy, urgent atomic.Uint64
	served, servedWrites           atomic.Uint64
	dials, dialsOK, dialFailures   atomic.Uint64
	commitCapped                   atomic.Uint64
}

// Stats returns the counters.
func (n *Net) Stats() Stats {
	return Stats{
		Requests: n.stats.requests.Load(), Writes: n.stats.writes.Load(),
		Lazy: n.stats.lazy.Load(), Urgent: n.stats.urgent.Load(),
		Served: n.stats.served.Load(), ServedWrites: n.stats.servedWrites.Load(),
		Dials: n.stats.dials.Load(), DialsOK: n.stats.dialsOK.Load(), DialFailures: n.stats.dialFailures.Load(),
		CommitCapped: n.stats.commitCapped.Load(),
	}
}
