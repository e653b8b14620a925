package raftmux

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// DefaultHeaderTimeout is the time a new connection has to send its header
// when [Options.HeaderTimeout] is not set.
const DefaultHeaderTimeout = 5 * time.Second

var (
	// ErrInvalidName is returned by [Mux.Layer] for a name that is empty or
	// longer than 255 bytes.
	ErrInvalidName = errors.New("raftmux: invalid layer name")
	// ErrLayerExists is returned by [Mux.Layer] for a name that is already
	// registered and not yet closed.
	ErrLayerExists = errors.New("raftmux: layer already registered")
)

// Options configures a [Mux]. The zero value is ready to use.
type Options struct {
	// Logger receives the reasons streams are refused. Nil discards them.
	Logger *slog.Logger
	// HeaderTimeout is the time a new connection has to send its whole
	// header before it is closed. Zero or negative means
	// DefaultHeaderTimeout.
	HeaderTimeout time.Duration
}

// Mux accepts connections on one listener and hands each to the [Layer]
// named in its header. All methods are safe for concurrent use.
type Mux struct {
	ln            net.Listener
	log           *slog.Logger
	headerTimeout time.Duration
	done          chan struct{} // closed by Close

	mu      sync.Mutex
	closed  bool
	layers  map[string]*Layer
	pending map[net.Conn]struct{} // accepted, header not yet read

	handshakes sync.WaitGroup // one per pending connection
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
	return &Mux{
		ln:            ln,
		log:           log,
		headerTimeout: timeout,
		done:          make(chan struct{}),
		layers:        make(map[string]*Layer),
		pending:       make(map[net.Conn]struct{}),
	}
}

// Addr returns the listener's address. Every layer reports it as its own.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Serve accepts connections until Close and reads each one's header in its
// own goroutine. It returns nil after Close, or the listener's error if the
// listener fails on its own. Transient accept errors (too many open files, a
// connection aborted before accept) are logged and retried with backoff.
// Call it once, in its own goroutine.
func (m *Mux) Serve() error {
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
		if !m.track(conn) {
			_ = conn.Close()
			return nil
		}
		go m.handshake(conn)
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

// track records conn as waiting for its header, so Close can close it. It
// reports false if the Mux is closed.
func (m *Mux) track(conn net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.pending[conn] = struct{}{}
	m.handshakes.Add(1)
	return true
}

// handshake reads conn's header and hands conn to its layer, or closes it.
func (m *Mux) handshake(conn net.Conn) {
	defer m.handshakes.Done()
	err := conn.SetReadDeadline(time.Now().Add(m.headerTimeout))
	var name string
	if err == nil {
		name, err = readHeader(conn)
	}
	if err == nil {
		err = conn.SetReadDeadline(time.Time{})
	}

	m.mu.Lock()
	delete(m.pending, conn)
	closed := m.closed
	layer := m.layers[name]
	m.mu.Unlock()

	remote := conn.RemoteAddr().String()
	switch {
	case closed:
		// Close has closed conn or is about to; make sure.
		_ = conn.Close()
	case err != nil:
		_ = conn.Close()
		m.logRefused(remote, err)
	case layer == nil:
		_ = conn.Close()
		m.log.Warn("raftmux: stream refused", "remote", remote, "reason", "unknown layer", "layer", name)
	default:
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
// closed) and every connection still waiting for its header. Streams
// already handed to a layer belong to their owner and stay open. Close
// returns once no header is being read; Serve then returns nil. Close the
// users of the layers (raft transports, HTTP servers) first if they should
// not see Accept errors. Later calls return nil.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.done)
	layers, pending := m.layers, m.pending
	m.layers, m.pending = nil, nil
	m.mu.Unlock()

	err := m.ln.Close()
	for _, l := range layers {
		l.shutdown()
	}
	for conn := range pending {
		_ = conn.Close()
	}
	m.handshakes.Wait()
	if err != nil {
		return fmt.Errorf("raftmux: close listener: %w", err)
	}
	return nil
}
