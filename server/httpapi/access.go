package httpapi

import (
	"context"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/server/answer"
)

// access is who may call a route: a set of roles (RoleAdmin may call
// every route and is not listed), or open.
type access uint8

const (
	// adminOnly routes take a RoleAdmin token.
	adminOnly access = 0
	// decide routes also take RoleDecide tokens.
	decide access = 1 << iota
	// read routes also take RoleRead tokens.
	read
	// open routes need no token at all.
	open
	// anyToken is what a caller needs to learn that a route does not exist
	// (404) or lacks a method (405): any known token.
	anyToken = decide | read
)

// routeAccess is the one table of who may call which route, by the route's
// pattern as New registers it. New panics on a route missing here, so a
// new route cannot be served without a decision about it;
// TestEveryRouteHasItsRoles walks the registered routes against DESIGN §7
// (decide: the decision routes; read: every GET; admin: everything).
var routeAccess = map[string]access{
	"POST /v1/allow":                   decide,
	"POST /v1/allow/batch":             decide,
	"GET /v1/clients/{client}":         decide | read,
	"PUT /v1/clients/{client}/tier":    adminOnly,
	"DELETE /v1/clients/{client}/tier": adminOnly,
	"POST /v1/clients/{client}/reset":  adminOnly,
	"PUT /v1/tiers/{tier}":             adminOnly,
	"DELETE /v1/tiers/{tier}":          adminOnly,
	"GET /v1/tiers":                    read,
	"GET /v1/audit":                    read,
	"PUT /v1/default":                  adminOnly,
	"GET /v1/cluster":                  read,
	"GET /v1/routes":                   decide | read, // deciding clients route by it
	"POST /v1/leave":                   adminOnly,
	"GET /v1/backup":                   adminOnly, // every client id, balance and request id
	"GET /metrics":                     read,
	"GET /healthz":                     open,
	"GET /readyz":                      open,
}

// accessOf returns the access of a route pattern, and panics (a
// programming error, caught by any test that builds a Server) if the
// table has none.
func accessOf(pattern string) access {
	acc, ok := routeAccess[pattern]
	if !ok {
		panic(fmt.Sprintf("httpapi: route %q has no entry in routeAccess (access.go): say which roles may call it", pattern))
	}
	return acc
}

func (acc access) allows(r Role) bool {
	switch r {
	case RoleAdmin:
		return true
	case RoleDecide:
		return acc&decide != 0
	case RoleRead:
		return acc&read != 0
	}
	return false
}

// guard wraps a route's handler with the checks every request passes
// before it, in this order:
//
//  1. With Options.LoopbackHostOnly, the Host header must name a loopback
//     address or "localhost" (403 host_not_allowed): a node without
//     tokens is then safe from DNS rebinding, where a web page's own
//     name is pointed at 127.0.0.1 to make the browser's requests
//     same-origin.
//  2. A method that may change state (anything but GET, HEAD, OPTIONS)
//     must not come from a browser on another origin: Sec-Fetch-Site
//     other than same-origin or none, or an Origin whose host is not the
//     request's Host (403 cross_origin; net/http.CrossOriginProtection).
//  3. Such a method must not carry a Content-Type other than
//     application/json (415 unsupported_media_type), body or no body. The
//     types a browser may send cross-origin without asking first
//     (forms, text/plain) are therefore never acted on, even by a browser
//     too old for step 2.
//  4. With Options.Auth, a route that is not open needs a known bearer
//     token (401 unauthenticated, WWW-Authenticate: Bearer) whose role
//     the route allows (403 forbidden).
//
// Each refusal is counted in quorate_http_refused_total by code.
func (s *Server) guard(acc access, h handlerFunc) handlerFunc {
	if acc == open {
		return h // health checks answer anyone: load balancers carry no tokens
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		actor, err := s.check(w, r, acc)
		if err != nil {
			s.refused.WithLabelValues(string(err.code)).Inc()
			return err
		}
		if acc == adminOnly && actor != "" {
			// Only changes are audited: a decision pays for no copy of
			// its request.
			r = r.WithContext(context.WithValue(r.Context(), actorKey{}, actor))
		}
		return h(w, r)
	}
}

// actorKey is the request context's key for the name of the token that
// authenticated an admin request.
type actorKey struct{}

// actorOf is who makes the change r asks for, for the audit trail: the
// name of its token, or fsm.Anonymous on a node without an auth file.
func actorOf(r *http.Request) string {
	if name, ok := r.Context().Value(actorKey{}).(string); ok {
		return name
	}
	return fsm.Anonymous
}

func (s *Server) check(w http.ResponseWriter, r *http.Request, acc access) (actor string, _ *apiError) {
	if s.opts.LoopbackHostOnly && !loopbackHost(r.Host) {
		return "", newError(api.CodeHostNotAllowed, fmt.Sprintf("Host %q is not a loopback address; a node without --auth-file answers only requests to 127.0.0.1, [::1] or localhost", r.Host))
	}
	if unsafeMethod(r.Method) {
		if err := s.origins.Check(r); err != nil {
			return "", newError(api.CodeCrossOrigin, "cross-origin browser requests may not change anything; call the API from a server, not a web page")
		}
		if ct := headerValue(r.Header, "Content-Type"); ct != "" && ct != "application/json" {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				return "", newError(api.CodeUnsupportedMediaType, fmt.Sprintf("Content-Type %q is not supported; send application/json, or no Content-Type without a body", ct))
			}
		}
	}
	if s.opts.Auth == nil {
		return "", nil
	}
	tok, ok := s.opts.Auth.identify(bearerToken(headerValue(r.Header, "Authorization")))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="quorate"`)
		return "", newError(api.CodeUnauthenticated, "send a known token as Authorization: Bearer <token>")
	}
	if !acc.allows(tok.role) {
		return "", newError(api.CodeForbidden, fmt.Sprintf("token %q has role %s, which may not %s %s", tok.name, tok.role, r.Method, r.URL.Path))
	}
	return tok.name, nil
}

// unsafeMethod reports whether method may change state (RFC 9110 §9.2.1).
func unsafeMethod(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// loopbackHost reports whether a Host header names a loopback IP address
// or localhost, with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newRefusedCounter registers quorate_http_refused_total on reg.
func newRefusedCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	return answer.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quorate_http_refused_total",
		Help: "Requests refused before their handler, by error code (unauthenticated, forbidden, cross_origin, host_not_allowed, unsupported_media_type).",
	}, []string{"code"}))
}
