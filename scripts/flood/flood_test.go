package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheRecordedClientHelloIsOne(t *testing.T) {
	msg, err := clientHello()
	require.NoError(t, err)
	require.Greater(t, len(msg), 9)
	assert.Equal(t, byte(0x16), msg[0], "a TLS handshake record")
	assert.Equal(t, byte(0x01), msg[5], "holding a ClientHello")
}

// listen accepts on loopback and counts connections and the bytes they send.
func listen(t *testing.T) (addr string, conns, bytesIn *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	conns, bytesIn = new(atomic.Int64), new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					bytesIn.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), conns, bytesIn
}

func TestHelloDialsAtItsRateAndSendsTheHello(t *testing.T) {
	addr, conns, bytesIn := listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := hello(ctx, addr, netip.MustParseAddr("127.0.0.1"), 200)
	require.NoError(t, err)
	assert.InDelta(t, 200, r.Dials, 60, "about 200 connections in a second")
	assert.Zero(t, r.DialErrors, r.FirstDialError)
	require.Eventually(t, func() bool { return conns.Load() == r.Dials }, 5*time.Second, 10*time.Millisecond)
	msg, err := clientHello()
	require.NoError(t, err)
	require.Eventually(t, func() bool { return bytesIn.Load() >= r.Dials*int64(len(msg)) }, 5*time.Second, 10*time.Millisecond,
		"every connection carried the hello")
}

func TestIdleHoldsConnectionsAndReopensClosedOnes(t *testing.T) {
	var served atomic.Int64
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }),
		// The server closes idle connections quickly, as a node does to
		// unauthenticated ones: the attacker opens them again.
		IdleTimeout: 100 * time.Millisecond,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := hold(ctx, ln.Addr().String(), netip.MustParseAddr("127.0.0.1"), 2, 20, holdIdle)
	require.NoError(t, err)
	assert.Equal(t, int64(20), r.Held, "all 20 held at once")
	assert.Positive(t, r.Closed, "the server closed idle ones")
	assert.Greater(t, r.Dials, int64(20), "and they were opened again")
	assert.GreaterOrEqual(t, served.Load(), r.Dials-r.DialErrors-20, "each sent its GET /healthz")
}

// The gossip attack announces 20 MiB on each connection and sends 2 MiB of
// it; a listener that reads a little and closes sees the header on every
// connection, and the attacker opens closed ones again.
func TestGossipStreamsAnnounceAndReopen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var headers atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 5)
				if _, err := io.ReadFull(c, buf); err == nil && bytes.Equal(buf, streamHeader) {
					headers.Add(1)
				}
				_, _ = io.CopyN(io.Discard, c, 64<<10) // a bounded read, then close
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := hold(ctx, ln.Addr().String(), netip.MustParseAddr("127.0.0.1"), 2, 10, holdStream)
	require.NoError(t, err)
	assert.Greater(t, r.Dials, int64(10), "closed connections were opened again")
	assert.Positive(t, r.Closed)
	// The 10 open when the attack ended may have been cut before their
	// header; every earlier one carried it.
	require.Eventually(t, func() bool { return headers.Load() >= r.Dials-10 }, 5*time.Second, 10*time.Millisecond,
		"%d headers in %d connections", headers.Load(), r.Dials)
	assert.Equal(t, uint32(20<<20), binary.BigEndian.Uint32(streamHeader[1:]), "each announces 20 MiB")
}

func TestFloodRefusesTargetsOffLoopback(t *testing.T) {
	var out bytes.Buffer
	assert.ErrorContains(t, run([]string{"-addr", "10.0.0.1:7071"}, &out), "loopback")
	assert.ErrorContains(t, run([]string{"-from", "10.0.0.1"}, &out), "loopback")
	assert.ErrorContains(t, run([]string{"-duration", "1h"}, &out), "(0, 5m]")
	addr, _, _ := listen(t)
	require.NoError(t, run([]string{"-attack", "hello", "-addr", addr, "-from", "127.0.0.1", "-rate", "50", "-duration", "200ms"}, &out))
	var r report
	require.NoError(t, json.Unmarshal(out.Bytes(), &r))
	assert.Equal(t, "hello", r.Attack)
	assert.Positive(t, r.Dials)
}
