package raftmux

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Reason says why the Mux closed a connection it accepted.
type Reason string

// Reasons counted in [Stats.Refused].
const (
	// ReasonLimit: MaxStreams or MaxStreamsPerIP was reached.
	ReasonLimit Reason = "limit"
	// ReasonEvicted: closed in its handshake to make room for a newer one.
	ReasonEvicted Reason = "evicted"
	// ReasonTLS: the TLS handshake failed or timed out (no certificate,
	// one the cluster CA did not sign, another protocol).
	ReasonTLS Reason = "tls"
	// ReasonHeader: the header was malformed, incomplete or too late.
	ReasonHeader Reason = "header"
	// ReasonUnknownLayer: the header named no registered layer.
	ReasonUnknownLayer Reason = "unknown_layer"
	// ReasonBacklog: the layer's accept queue was full or closed.
	ReasonBacklog Reason = "backlog"
	// ReasonIdle: a stream carried nothing for IdleTimeout.
	ReasonIdle Reason = "idle"
)

// Reasons lists every Reason, for exporting [Stats.Refused].
var Reasons = []Reason{ReasonLimit, ReasonEvicted, ReasonTLS, ReasonHeader, ReasonUnknownLayer, ReasonBacklog, ReasonIdle}

// Stats is a snapshot of a Mux's accepted streams.
type Stats struct {
	// Open is the streams open now, in their handshake or handed over.
	Open int
	// Pending is the streams still in their handshake.
	Pending int
	// Accepted counts streams handed to a layer since New.
	Accepted uint64
	// Refused counts, by reason, connections closed by the Mux since New.
	Refused map[Reason]uint64
}

type counters struct {
	accepted atomic.Uint64
	refused  sync.Map // Reason -> *atomic.Uint64
}

func (c *counters) add(r Reason) {
	v, ok := c.refused.Load(r)
	if !ok {
		v, _ = c.refused.LoadOrStore(r, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
}

// Stats returns the Mux's current counts.
func (m *Mux) Stats() Stats {
	st := Stats{Accepted: m.counters.accepted.Load(), Refused: map[Reason]uint64{}}
	for _, r := range Reasons {
		if v, ok := m.counters.refused.Load(r); ok {
			st.Refused[r] = v.(*atomic.Uint64).Load()
		}
	}
	m.mu.Lock()
	st.Open, st.Pending = len(m.streams), m.pending
	m.mu.Unlock()
	return st
}

// stream is an accepted connection while the Mux accounts for it: from
// Accept until it is closed, by whoever owns it then. It records when it
// last carried bytes, for IdleTimeout.
type stream struct {
	net.Conn
	m        *Mux
	ip       string
	seq      uint64
	lastUsed atomic.Int64 // unix ns

	// Guarded by m.mu.
	pending bool // in its handshake
	counted bool // in m.streams and m.perIP
}

func (s *stream) touch() { s.lastUsed.Store(time.Now().UnixNano()) }

func (s *stream) Read(b []byte) (int, error) {
	n, err := s.Conn.Read(b)
	if n > 0 {
		s.touch()
	}
	return n, err
}

func (s *stream) Write(b []byte) (int, error) {
	n, err := s.Conn.Write(b)
	if n > 0 {
		s.touch()
	}
	return n, err
}

// Close closes the connection and frees its place in the limits.
func (s *stream) Close() error {
	s.m.mu.Lock()
	s.m.release(s)
	s.m.mu.Unlock()
	return s.Conn.Close()
}

// NetConn returns the TCP connection, like tls.Conn.NetConn.
func (s *stream) NetConn() net.Conn { return s.Conn }

// admit accounts for a newly accepted conn, returning it as a pending
// stream, or nil if it must be closed: ok is false when the Mux is closed,
// true when a limit refused it. To make room it may close the oldest
// pending stream.
func (m *Mux) admit(conn net.Conn) (s *stream, ok bool) {
	ip := remoteIP(conn)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, false
	}
	refuse := m.perIP[ip] >= m.maxPerIP
	var victim *stream
	if !refuse && (m.pending >= m.maxPending || len(m.streams) >= m.maxStreams) {
		if victim = m.oldestPending(); victim != nil {
			m.release(victim)
		}
	}
	if refuse || len(m.streams) >= m.maxStreams {
		open, fromIP := len(m.streams), m.perIP[ip]
		m.mu.Unlock()
		m.counters.add(ReasonLimit)
		m.warnSometimes("raftmux: connection refused", "remote", conn.RemoteAddr().String(), "reason", "limit",
			"open", open, "max_streams", m.maxStreams, "from_ip", fromIP, "max_per_ip", m.maxPerIP)
		return nil, true
	}
	m.seq++
	s = &stream{Conn: conn, m: m, ip: ip, seq: m.seq, pending: true, counted: true}
	s.touch()
	m.streams[s] = struct{}{}
	m.perIP[ip]++
	m.pending++
	m.handshakes.Add(1)
	m.mu.Unlock()
	if victim != nil {
		// Its handshake goroutine sees the close and gives up.
		_ = victim.Conn.Close()
		m.counters.add(ReasonEvicted)
		m.log.Debug("raftmux: stream refused", "remote", victim.RemoteAddr().String(), "reason", "evicted",
			"pending", m.maxPending)
	}
	return s, true
}

// oldestPending returns the pending stream accepted first, or nil. Called
// with m.mu held; it walks the open streams, at most MaxStreams of them.
func (m *Mux) oldestPending() *stream {
	var old *stream
	for s := range m.streams {
		if s.pending && (old == nil || s.seq < old.seq) {
			old = s
		}
	}
	return old
}

// settle marks s as no longer in its handshake. Called with m.mu held.
func (m *Mux) settle(s *stream) {
	if s.pending && s.counted {
		m.pending--
	}
	s.pending = false
}

// release frees s's place in the limits, once. Called with m.mu held.
func (m *Mux) release(s *stream) {
	if !s.counted {
		return
	}
	m.settle(s)
	s.counted = false
	delete(m.streams, s)
	if m.perIP[s.ip]--; m.perIP[s.ip] <= 0 {
		delete(m.perIP, s.ip)
	}
}

// reapIdle closes, until Close, every handed-over stream that has carried
// nothing for IdleTimeout. It looks a few times per IdleTimeout, so a
// stream lives at most about 1.25 × IdleTimeout without traffic.
func (m *Mux) reapIdle() {
	defer m.reaper.Done()
	tick := time.NewTicker(max(m.idleTimeout/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-tick.C:
		}
		cutoff := time.Now().Add(-m.idleTimeout).UnixNano()
		var idle []*stream
		m.mu.Lock()
		for s := range m.streams {
			if !s.pending && s.lastUsed.Load() < cutoff {
				idle = append(idle, s)
			}
		}
		m.mu.Unlock()
		for _, s := range idle {
			m.counters.add(ReasonIdle)
			m.log.Debug("raftmux: stream closed", "remote", s.RemoteAddr().String(), "reason", "idle", "timeout", m.idleTimeout)
			_ = s.Close()
		}
	}
}

// remoteIP is the IP address conn comes from (the whole address if it has
// no port).
func remoteIP(conn net.Conn) string {
	a := conn.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}
