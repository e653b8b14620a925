// Package netns dials TCP connections from inside a named network
// namespace, so that one harness process in the root namespace can talk to
// nodes that live in namespaces of their own without any route or address
// being added to the root namespace.
package netns

import (
	"context"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// Path returns the bind-mount path of a namespace created with `ip netns add`.
func Path(name string) string { return "/var/run/netns/" + name }

// Dialer returns a DialContext that creates every socket inside the network
// namespace at nsPath. Each dial runs on a fresh goroutine locked to its OS
// thread, which switches into the namespace and is never unlocked, so the
// runtime discards the thread when the goroutine ends and no other
// goroutine ever runs in that namespace. A socket stays in the namespace it
// was created in, so the connection can be used from any goroutine.
func Dialer(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			conn net.Conn
			err  error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // deliberately never unlocked: see above
			fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				ch <- result{err: fmt.Errorf("netns %s: %w", nsPath, err)}
				return
			}
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
			if err != nil {
				ch <- result{err: fmt.Errorf("setns %s: %w", nsPath, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- result{conn: c, err: err}
		}()
		select {
		case r := <-ch:
			return r.conn, r.err
		case <-ctx.Done():
			go func() {
				if r := <-ch; r.conn != nil {
					r.conn.Close()
				}
			}()
			return nil, ctx.Err()
		}
	}
}

// Listen opens a TCP listener inside the network namespace at nsPath, with
// the same locked-thread technique as Dialer.
func Listen(nsPath, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: fmt.Errorf("netns %s: %w", nsPath, err)}
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", nsPath, err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln: ln, err: err}
	}()
	r := <-ch
	return r.ln, r.err
}
