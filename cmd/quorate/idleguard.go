package main

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/server/httpapi"
)

// unauthenticatedIdle is how long the HTTP port keeps a connection idle
// between requests while it has never carried a known token: a caller
// that authenticates keeps the server's IdleTimeout (2 minutes).
// Connections that only ever asked /healthz or were refused are the cheap
// way to hold the port's connection caps.
var unauthenticatedIdle = 5 * time.Second // a variable only so that a test can shorten it

// idleGuard closes, after idle, the idle connections of an http.Server
// that have not yet carried a request with a known token. Its
// ConnContext, ConnState and Handler must all be installed on the server.
type idleGuard struct {
	auth  *httpapi.Authenticator
	idle  time.Duration
	mu    sync.Mutex
	conns map[net.Conn]*guardedConn
}

type guardedConn struct {
	authenticated atomic.Bool
	timer         *time.Timer // while idle and not authenticated
}

func newIdleGuard(auth *httpapi.Authenticator, idle time.Duration) *idleGuard {
	return &idleGuard{auth: auth, idle: idle, conns: map[net.Conn]*guardedConn{}}
}

// ConnContext is the server's ConnContext hook: it starts following c.
func (g *idleGuard) ConnContext(ctx context.Context, c net.Conn) context.Context {
	gc := &guardedConn{}
	g.mu.Lock()
	g.conns[c] = gc
	g.mu.Unlock()
	return context.WithValue(ctx, guardedConnKey{}, gc)
}

// ConnState is the server's ConnState hook.
func (g *idleGuard) ConnState(c net.Conn, s http.ConnState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gc := g.conns[c]
	if gc == nil {
		return
	}
	if gc.timer != nil {
		gc.timer.Stop()
		gc.timer = nil
	}
	switch s {
	case http.StateIdle:
		if !gc.authenticated.Load() {
			gc.timer = time.AfterFunc(g.idle, func() { _ = c.Close() })
		}
	case http.StateClosed, http.StateHijacked:
		delete(g.conns, c)
	}
}

// Handler marks the connection of a request with a known token as
// authenticated, then serves it with next.
func (g *idleGuard) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gc, ok := r.Context().Value(guardedConnKey{}).(*guardedConn); ok && !gc.authenticated.Load() {
			if known, _ := g.auth.MayDecide(r.Header.Get("Authorization")); known {
				gc.authenticated.Store(true)
			}
		}
		next.ServeHTTP(w, r)
	})
}

type guardedConnKey struct{}
