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

// inNamespace runs fn on a fresh goroutine locked to its OS thread, after
// switching that thread into the network namespace at nsPath. The thread is
// never unlocked, so the runtime discards it when the goroutine ends and no
// other goroutine ever runs in that namespace. Sockets fn creates stay in
// the namespace and may be used from any goroutine. The result arrives on
// the returned channel.
func inNamespace[T any](nsPath string, fn func() (T, error)) <-chan result[T] {
	ch := make(chan result[T], 1)
	go func() {
		runtime.LockOSThread() // deliberately never unlocked: see above
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result[T]{err: fmt.Errorf("netns %s: %w", nsPath, err)}
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			ch <- result[T]{err: fmt.Errorf("setns %s: %w", nsPath, err)}
			return
		}
		v, err := fn()
		ch <- result[T]{v: v, err: err}
	}()
	return ch
}

type result[T any] struct {
	v   T
	err error
}

// Dialer returns a DialContext that creates every socket inside the network
// namespace at nsPath.
func Dialer(nsPath string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ch := inNamespace(nsPath, func() (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		})
		select {
		case r := <-ch:
			return r.v, r.err
		case <-ctx.Done():
			go func() {
				if r := <-ch; r.v != nil {
					r.v.Close()
				}
			}()
			return nil, ctx.Err()
		}
	}
}

// Listen opens a TCP listener inside the network namespace at nsPath.
func Listen(nsPath, addr string) (net.Listener, error) {
	r := <-inNamespace(nsPath, func() (net.Listener, error) { return net.Listen("tcp", addr) })
	return r.v, r.err
}
