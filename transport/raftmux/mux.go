package raftmux

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults for the zero values of [Options].
const (
	// DefaultHeaderTimeout is the time a new connection has to finish its
	// TLS handshake and send its header.
	DefaultHeaderTimeout = 5 * time.Second
	// DefaultIdleTimeout is how long a stream may carry nothing either way
	// before the Mux closes it.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultMaxStreams caps the streams open at once, handshaking or not.
	DefaultMaxStreams = 4096
	// DefaultMaxStreamsPerIP caps the streams open at once from one address.
	DefaultMaxStreamsPerIP = 1024
	// DefaultMaxPending caps the connections still in their handshake.
	DefaultMaxPending = 512
	// DefaultMaxPendingPerIP caps the connections from one address still in
	// their handshake: well below DefaultMaxPending, so one address cannot
	// hold the whole pool.
	DefaultMaxPendingPerIP = 32
	// DefaultHandshakeRate and DefaultHandshakeRatePerIP bound the new
	// connections per second from addresses that never completed a
	// handshake here, in all and from one address.
	DefaultHandshakeRate      = 1000
	DefaultHandshakeRatePerIP = 100
)

var (
	// ErrInvalidName is returned by [Mux.Layer] for a name that is empty or
	// longer than 255 bytes.
	ErrInvalidName = errors.New("raftmux: invalid layer name")
	// ErrLayerExists is returned by [Mux.Layer] for a name that is already
	// registered and not yet closed.
	ErrLayerExists = errors.New("raftmux: layer already registered")
)

// TLS makes every stream a TLS connection: Server configures the accepting
// side, Client the dialing side. For a cluster, Server requires and
// verifies client certificates and Client verifies the server's, both
// against the cluster CA (see package peertls).
type TLS struct {
	Server *tls.Config
	Client *tls.Config
}

// Options configures a [Mux]. The zero value is ready to use: plain TCP,
// default limits.
type Options struct {
	// Logger receives the reasons streams are refused. Nil discards them.
	Logger *slog.Logger
	// TLS, if set, runs every accepted and dialed stream over TLS; the
	// header travels inside it. Nil: plain TCP.
	TLS *TLS
	// HeaderTimeout is the time a new connection has to finish its TLS
	// handshake and send its whole header before it is closed. Zero or
	// negative means DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout closes a stream handed to a layer once nothing has been
	// read from it or written to it for this long. Zero means
	// DefaultIdleTimeout; negative, never.
	IdleTimeout time.Duration
	// MaxStreams caps the accepted streams open at once, in their handshake
	// or handed to a layer (DefaultMaxStreams if zero). Beyond it a new
	// connection closes the oldest one still in its handshake, or is
	// refused if there is none.
	MaxStreams int
	// MaxStreamsPerIP caps the accepted streams open at once from one
	// remote IP address (DefaultMaxStreamsPerIP if zero); beyond it new
	// connections from that address are refused.
	MaxStreamsPerIP int
	// MaxPending caps the connections still in their handshake
	// (DefaultMaxPending if zero). Beyond it a new connection closes the
	// oldest pending one: a flood of connections that never finish their
	// handshake turns over among itself, while a real peer, which finishes
	// in milliseconds, gets through. The one closed is the oldest from an
	// address that never completed a handshake here, if there is one: known
	// peers are served first.
	MaxPending int
	// MaxPendingPerIP caps the connections from one remote address still
	// in their handshake (DefaultMaxPendingPerIP if zero, at most
	// MaxPending). Beyond it a new connection from that address closes that
	// address's oldest pending one: a flood from one address turns over
	// among itself and never takes another's place.
	MaxPendingPerIP int
	// HandshakeRate and HandshakeRatePerIP bound the new connections per
	// second from addresses that never completed a handshake here, in all
	// and from one address, with a burst of one second's worth (defaults
	// DefaultHandshakeRate and DefaultHandshakeRatePerIP if zero; negative:
	// no bound). Beyond them a connection is closed at once, before its
	// TLS handshake costs anything. An address that completed a handshake
	// (a peer) is not held to them.
	HandshakeRate, HandshakeRatePerIP int
	// Now is the clock of the handshake rates (time.Now if nil).
	Now func() time.Time
}

// Mux accepts connections on one listener and hands each to the [Layer]
// named in its header. All methods are safe for concurrent use.
type Mux struct {
	ln            net.Listener
	log           *slog.Logger
	tls           *TLS
	headerTimeout time.Duration
	idleTimeout   time.Duration
	maxStreams    int
	maxPerIP      int
	maxPending    int
	maxPendingIP  int
	rate, rateIP  float64 // handshakes per second from unknown addresses; 0: unbounded
	now           func() time.Time
	done          chan struct{} // closed by Close
	counters      counters
	warned        atomic.Int64 // unix ns of the last refusal logged at Warn

	mu      sync.Mutex
	closed  bool
	layers  map[string]*Layer
	streams map[*stream]struct{} // every accepted stream still open
	perIP   map[string]int       // open streams by remote IP
	pending int                  // streams in streams that are still pending
	// pendingIP counts the pending streams by remote IP; known holds the
	// addresses that completed a handshake (peers), and rates the unknown
	// addresses' handshake budgets (limits.go).
	pendingIP map[string]int
	known     map[string]time.Time
	rates     map[string]*tokenBucket
	allRate   tokenBucket
	seq       uint64 // order of acceptance, for eviction

	handshakes sync.WaitGroup // one per pending connection
	reaper     sync.WaitGroup
}

// New returns a Mux that will serve ln. It takes ownership of ln: Close
// closes it. Nothing is accepted until Serve is called, so register the
// layers first to avoid refusing early streams.
func New(ln net.Listener, opts Options) *Mux {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := opts.HeaderTimeout
	if timeout <= 0 {
		timeout = DefaultHeaderTimeout
	}
	idle := opts.IdleTimeout
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	maxPending := cmp.Or(max(opts.MaxPending, 0), DefaultMaxPending)
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Mux{
		ln:            ln,
		log:           log,
		tls:           opts.TLS,
		headerTimeout: timeout,
		idleTimeout:   idle,
		maxStreams:    cmp.Or(max(opts.MaxStreams, 0), DefaultMaxStreams),
		maxPerIP:      cmp.Or(max(opts.MaxStreamsPerIP, 0), DefaultMaxStreamsPerIP),
		maxPending:    maxPending,
		maxPendingIP:  min(cmp.Or(max(opts.MaxPendingPerIP, 0), DefaultMaxPendingPerIP), maxPending),
		rate:          rateOption(opts.HandshakeRate, DefaultHandshakeRate),
		rateIP:        rateOption(opts.HandshakeRatePerIP, DefaultHandshakeRatePerIP),
		now:           now,
		done:          make(chan struct{}),
		layers:        make(map[string]*Layer),
		streams:       make(map[*stream]struct{}),
		perIP:         make(map[string]int),
		pendingIP:     make(map[string]int),
		known:         make(map[string]time.Time),
		rates:         make(map[string]*tokenBucket),
	}
}

// Addr returns the listener's address. Every layer reports it as its own.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Serve accepts connections until Close and reads each one's header (after
// its TLS handshake, with TLS) in its own goroutine. It returns nil after
// Close, or the listener's error if the listener fails on its own.
// Transient accept errors (too many open files, a connection aborted before
// accept) are logged and retried with backoff. Call it once, in its own
// goroutine.
func (m *Mux) Serve() error {
	// The reaper starts under the lock Close takes, so that Close either
	// waits for it or finds the mux closed before it starts.
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	if m.idleTimeout > 0 {
		m.reaper.Add(1)
		go m.reapIdle()
	}
	m.mu.Unlock()
	const baseDelay, maxDelay = 5 * time.Millisecond, time.Second
	var delay time.Duration
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			if m.isClosed() {
				return nil
			}
			if !transientAcceptError(err) {
				return fmt.Errorf("raftmux: accept: %w", err)
			}
			delay = min(max(2*delay, baseDelay), maxDelay)
			m.log.Warn("raftmux: accept failed; retrying", "error", err, "delay", delay)
			select {
			case <-time.After(delay):
				continue
			case <-m.done:
				return nil
			}
		}
		delay = 0
		s, ok := m.admit(conn)
		if s == nil {
			_ = conn.Close()
			if !ok {
				return nil // closed
			}
			continue
		}
		go m.handshake(s)
	}
}

// transientAcceptError reports whether Accept may succeed if tried again.
func transientAcceptError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ECONNRESET)
}

// handshake runs s's TLS handshake, if any, reads its header and hands the
// stream to its layer, or closes it.
func (m *Mux) handshake(s *stream) {
	defer m.handshakes.Done()
	var conn net.Conn = s
	err := s.SetDeadline(time.Now().Add(m.headerTimeout))
	tlsFailed := false
	if err == nil && m.tls != nil {
		tc := tls.Server(s, m.tls.Server)
		conn = tc
		err = tc.Handshake()
		tlsFailed = err != nil
	}
	var name string
	if err == nil {
		name, err = readHeader(conn)
	}
	if err == nil {
		err = s.SetDeadline(time.Time{})
	}

	m.mu.Lock()
	evicted := !s.counted // admit closed it to make room, and counted that
	m.settle(s)
	closed := m.closed
	layer := m.layers[name]
	m.mu.Unlock()

	remote := s.RemoteAddr().String()
	switch {
	case closed, evicted:
		// Close or admit has closed the stream or is about to; make sure.
		_ = s.Close()
	case err != nil:
		_ = s.Close()
		if tlsFailed {
			m.counters.add(ReasonTLS)
			m.logRefusedTLS(remote, err)
		} else {
			m.counters.add(ReasonHeader)
			m.logRefused(remote, err)
		}
	case layer == nil:
		_ = conn.Close()
		m.counters.add(ReasonUnknownLayer)
		m.log.Warn("raftmux: stream refused", "remote", remote, "reason", "unknown layer", "layer", name)
	default:
		m.mu.Lock()
		m.markKnown(s.ip)
		m.mu.Unlock()
		layer.deliver(conn)
	}
}

// logRefused logs why a header could not be read: quietly for a peer that
// went away or was too slow, loudly for one speaking another protocol.
func (m *Mux) logRefused(remote string, err error) {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		m.log.Debug("raftmux: stream refused", "remote", remote, "reason", "header timeout", "timeout", m.headerTimeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		m.log.Debug("raftmux: stream refused", "remote", remote, "reason", "closed before header")
	case errors.Is(err, errBadMagic), errors.Is(err, errEmptyName):
		m.log.Warn("raftmux: stream refused", "remote", remote, "reason", err.Error())
	default:
		m.log.Debug("raftmux: stream refused", "remote", remote, "reason", "read header", "error", err)
	}
}

// logRefusedTLS logs a failed handshake: a peer without a certificate of
// the cluster, or with a certificate the cluster CA did not sign.
func (m *Mux) logRefusedTLS(remote string, err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		m.log.Debug("raftmux: stream refused", "remote", remote, "reason", "handshake timeout", "timeout", m.headerTimeout)
		return
	}
	m.warnSometimes("raftmux: stream refused", "remote", remote, "reason", "tls handshake", "error", err)
}

// warnSometimes logs at Warn at most once a second and at Debug otherwise,
// so that a flood of refusals cannot flood the log.
func (m *Mux) warnSometimes(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := m.warned.Load()
	if now-last >= int64(time.Second) && m.warned.CompareAndSwap(last, now) {
		m.log.Warn(msg, args...)
		return
	}
	m.log.Debug(msg, args...)
}

// Layer registers the destination name and returns its layer. The name is
// 1..255 bytes; registering a name that is already registered fails with
// ErrLayerExists, and after Close every call fails with an error wrapping
// net.ErrClosed. Once the layer is closed, the name may be registered again.
func (m *Mux) Layer(name string) (*Layer, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("raftmux: register layer %q: %w", name, net.ErrClosed)
	}
	if _, ok := m.layers[name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrLayerExists, name)
	}
	l := newLayer(m, name)
	m.layers[name] = l
	return l, nil
}

// unregister removes l, if it is still the layer registered under its name.
func (m *Mux) unregister(l *Layer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.layers[l.name] == l {
		delete(m.layers, l.name)
	}
}

func (m *Mux) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// Close closes the listener, every layer (their Accept returns an error
// wrapping net.ErrClosed, and connections queued but not yet accepted are
// closed) and every connection still in its handshake. Streams already
// handed to a layer belong to their owner and stay open (no longer closed
// when idle). Close returns once no handshake is running; Serve then
// returns nil. Close the users of the layers (raft transports, HTTP
// servers) first if they should not see Accept errors. Later calls return
// nil.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.done)
	layers := m.layers
	m.layers = nil
	var pending []*stream
	for s := range m.streams {
		if s.pending {
			pending = append(pending, s)
		}
	}
	m.mu.Unlock()

	err := m.ln.Close()
	for _, l := range layers {
		l.shutdown()
	}
	for _, s := range pending {
		_ = s.Close()
	}
	m.handshakes.Wait()
	m.reaper.Wait()
	if err != nil {
		return fmt.Errorf("raftmux: close listener: %w", err)
	}
	return nil
}
