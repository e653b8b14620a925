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
	// ReasonRate: a connection from an address that never completed a
	// handshake, beyond HandshakeRate or HandshakeRatePerIP.
	ReasonRate Reason = "rate"
)

// Reasons lists every Reason, for exporting [Stats.Refused].
var Reasons = []Reason{ReasonLimit, ReasonEvicted, ReasonTLS, ReasonHeader, ReasonUnknownLayer, ReasonBacklog, ReasonIdle, ReasonRate}

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
// true when a limit refused it. An address that never completed a
// handshake is held to the handshake rates first. To make room it may
// close a pending stream: the address's own oldest when it is at
// MaxPendingPerIP, else the oldest from an unknown address, else the
// oldest.
func (m *Mux) admit(conn net.Conn) (s *stream, ok bool) {
	ip := remoteIP(conn)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, false
	}
	if _, known := m.known[ip]; !known && !m.takeHandshake(ip) {
		m.mu.Unlock()
		m.counters.add(ReasonRate)
		m.warnSometimes("raftmux: connection refused", "remote", conn.RemoteAddr().String(), "reason", "handshake rate",
			"per_second", m.rate, "per_second_per_ip", m.rateIP)
		return nil, true
	}
	refuse := m.perIP[ip] >= m.maxPerIP
	var victim *stream
	switch {
	case refuse:
	case m.pendingIP[ip] >= m.maxPendingIP:
		victim = m.oldestPending(func(p *stream) bool { return p.ip == ip })
	case m.pending >= m.maxPending || len(m.streams) >= m.maxStreams:
		if victim = m.oldestPending(func(p *stream) bool { _, known := m.known[p.ip]; return !known }); victim == nil {
			victim = m.oldestPending(nil)
		}
	}
	if victim != nil {
		m.release(victim)
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
	m.pendingIP[ip]++
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

// oldestPending returns the pending stream accepted first among those
// match accepts (all, if nil), or nil. Called with m.mu held; it walks
// the open streams, at most MaxStreams of them.
func (m *Mux) oldestPending(match func(*stream) bool) *stream {
	var old *stream
	for s := range m.streams {
		if s.pending && (old == nil || s.seq < old.seq) && (match == nil || match(s)) {
			old = s
		}
	}
	return old
}

// maxKnown and maxRates bound the remembered peers and handshake budgets.
const (
	maxKnown = 4096
	maxRates = 8192
)

// markKnown records that ip completed a handshake: from now on it is a
// peer, not held to the handshake rates and served first. Called with
// m.mu held.
func (m *Mux) markKnown(ip string) {
	if _, ok := m.known[ip]; !ok && len(m.known) >= maxKnown {
		var oldest string
		var at time.Time
		for k, t := range m.known {
			if oldest == "" || t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(m.known, oldest)
	}
	m.known[ip] = m.now()
	delete(m.rates, ip)
}

// takeHandshake spends one handshake of ip's budget and of the budget of
// all unknown addresses, and reports whether both had one. Called with
// m.mu held.
func (m *Mux) takeHandshake(ip string) bool {
	now := m.now()
	b := m.rates[ip]
	if b == nil {
		if len(m.rates) >= maxRates {
			for k, r := range m.rates {
				if r.full(now, m.rateIP) {
					delete(m.rates, k)
				}
			}
		}
		b = &tokenBucket{}
		m.rates[ip] = b
	}
	if !b.take(now, m.rateIP) {
		return false
	}
	return m.allRate.take(now, m.rate)
}

// rateOption is a handshake rate option as a rate: the default for 0,
// unbounded (0) for a negative one.
func rateOption(v, def int) float64 {
	switch {
	case v == 0:
		return float64(def)
	case v < 0:
		return 0
	}
	return float64(v)
}

// tokenBucket is a budget of rate events per second with a burst of one
// second's worth; a rate of 0 is unbounded.
type tokenBucket struct {
	tokens float64
	last   time.Time
}

func (b *tokenBucket) refill(now time.Time, rate float64) {
	if b.last.IsZero() {
		b.tokens = rate
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(rate, b.tokens+d.Seconds()*rate)
	}
	b.last = now
}

func (b *tokenBucket) take(now time.Time, rate float64) bool {
	if rate <= 0 {
		return true
	}
	b.refill(now, rate)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (b *tokenBucket) full(now time.Time, rate float64) bool {
	b.refill(now, rate)
	return b.tokens >= rate
}

// settle marks s as no longer in its handshake. Called with m.mu held.
func (m *Mux) settle(s *stream) {
	if s.pending && s.counted {
		m.pending--
		if m.pendingIP[s.ip]--; m.pendingIP[s.ip] <= 0 {
			delete(m.pendingIP, s.ip)
		}
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
