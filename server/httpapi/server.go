// Package httpapi is quorate's public HTTP API (v1), served from a Service
// (which *cluster.Node satisfies), and a typed Go client for it.
//
// Routes (README.md, "HTTP API (v1)"; ARCHITECTURE.md, "The life of one
// decision", follows POST /v1/allow through the node):
//
//	POST   /v1/allow                  decide one request
//	POST   /v1/allow/batch            decide up to Options.MaxBatch requests, answers in order
//	GET    /v1/clients/{client}       tier, policy and balance, without consuming
//	PUT    /v1/clients/{client}/tier  assign a tier     DELETE: remove the assignment
//	POST   /v1/clients/{client}/reset forget the client's bucket or window (admin)
//	PUT    /v1/tiers/{tier}           set a tier policy DELETE: remove the tier
//	GET    /v1/tiers                  default, tiers and the configuration version
//	GET    /v1/audit                  configuration changes: who, when, before and after
//	PUT    /v1/default                set the default policy
//	GET    /v1/cluster                cluster.Status
//	GET    /v1/backup                 a backup of every group (admin; cluster/backup's format)
//	GET    /v1/routes                 api.RoutesResponse
//	GET    /healthz                   liveness: 200 while the process serves HTTP
//	GET    /readyz                    readiness: 200 when every group has a leader, else 503
//	GET    /metrics                   Prometheus metrics
//
// Every request first passes the guard (access.go): with Options.Auth, a
// bearer token whose role the route allows (routeAccess, the one table of
// roles), and for every method that changes state, no cross-origin
// browser request and no Content-Type but application/json.
//
// Every answer is JSON (except /metrics) with Cache-Control: no-store. Errors
// are {"error":{"code","message"}}; codes are the Code constants, and every
// 400 names the field at fault. Bad input is refused before it reaches the
// Service, so it changes nothing. Status mapping:
//
//	400 bad input; 401 unauthenticated (with WWW-Authenticate: Bearer);
//	403 forbidden, cross_origin or host_not_allowed;
//	404 tier_not_found or not_found; 405 method_not_allowed
//	(with Allow); 413 body_too_large; 415 unsupported_media_type;
//	500 internal (details only in the node's log);
//	503 unavailable, shutting_down, timeout, not_ready, all with Retry-After: 1.
//
// A deadline passing is 503 timeout rather than 504: like unavailable, it
// means the cluster could not decide in time, and a retry with the same
// request_id is safe.
package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/server/answer"
)

// Defaults for Options.
const (
	DefaultMaxBodyBytes      = 64 << 10 // 64 KiB
	DefaultMaxBatchBodyBytes = 1 << 20  // 1 MiB
	DefaultMaxBatch          = 1000
	DefaultTimeout           = 5 * time.Second
	DefaultMaxTimeout        = 60 * time.Second
)

// Options configure a Server. The zero value of every field means its default.
type Options struct {
	// Logger receives internal errors (500s) and failures to write answers.
	// Nil discards them.
	Logger *slog.Logger
	// Registerer receives the API's metrics. Nil means a private registry,
	// never prometheus.DefaultRegisterer. Registering on a registry that
	// already holds identical collectors (another Server) shares them.
	Registerer prometheus.Registerer
	// Gatherer is what GET /metrics serves (with the private registry's
	// metrics added when Registerer is nil). Nil means the Registerer if it
	// is also a Gatherer (a *prometheus.Registry is) or the private
	// registry; if Registerer is set but cannot gather, /metrics is 404.
	Gatherer prometheus.Gatherer
	// MaxBodyBytes limits the body of every endpoint but the batch one
	// (default DefaultMaxBodyBytes, 64 KiB). Larger bodies get 413.
	MaxBodyBytes int64
	// MaxBatchBodyBytes limits the body of POST /v1/allow/batch (default
	// DefaultMaxBatchBodyBytes, 1 MiB). Larger bodies get 413.
	MaxBatchBodyBytes int64
	// MaxBatch is the most requests in one batch (default DefaultMaxBatch,
	// at most fsm.MaxBatch). More get 400 batch_too_large.
	MaxBatch int
	// DefaultTimeout is the deadline of a call into the Service when the
	// caller sends no api.HeaderTimeout (default 5s).
	DefaultTimeout time.Duration
	// MaxTimeout caps the deadline a caller may ask for (default 60s).
	MaxTimeout time.Duration
	// Auth, when not nil, requires a bearer token on every route but
	// /healthz and /readyz, with a role the route allows (access.go). Nil
	// serves every caller.
	Auth *Authenticator
	// Scheme is how callers reach this node's API and, the cluster's nodes
	// being configured alike, every node's: "http" (the default) or
	// "https". GET /v1/routes builds leaders' URLs with it.
	Scheme string
	// LoopbackHostOnly refuses requests whose Host header is not a
	// loopback address or localhost (access.go, guard): for a node without
	// Auth, so that a web page cannot reach it by DNS rebinding.
	LoopbackHostOnly bool
}

func (o Options) withDefaults() Options {
	if o.Scheme == "" {
		o.Scheme = "http"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxBatchBodyBytes <= 0 {
		o.MaxBatchBodyBytes = DefaultMaxBatchBodyBytes
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	o.MaxBatch = min(o.MaxBatch, fsm.MaxBatch)
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = DefaultTimeout
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = DefaultMaxTimeout
	}
	o.DefaultTimeout = min(o.DefaultTimeout, o.MaxTimeout)
	return o
}

// Server serves the v1 API from a Service. It is an http.Handler, safe for
// concurrent use, and holds no state besides its metrics and what it
// remembers to write answers without allocating (buffers, header values).
type Server struct {
	svc     Service
	opts    Options
	log     *slog.Logger
	metrics *metrics
	refused *prometheus.CounterVec
	origins *http.CrossOriginProtection
	mux     *http.ServeMux
	// patterns are the registered routes' patterns, in order.
	patterns []string
	// bufs holds the buffers bodies are read into and answers encoded into.
	bufs bufferPool
	// rates and routesVersion are header and body values already written
	// (allow.go).
	rates         answer.Rates
	routesVersion atomic.Pointer[routesVersionHeader]
}

var _ http.Handler = (*Server)(nil)

// New returns a Server answering from svc. It registers its metrics on
// opts.Registerer (see Options) and panics only if that registry holds
// different collectors under the same names.
func New(svc Service, opts Options) *Server {
	opts = opts.withDefaults()
	gatherer := opts.Gatherer
	reg := opts.Registerer
	if reg == nil {
		private := prometheus.NewRegistry()
		reg = private
		if gatherer == nil {
			gatherer = private
		} else {
			gatherer = prometheus.Gatherers{private, gatherer}
		}
	}
	if gatherer == nil {
		gatherer, _ = reg.(prometheus.Gatherer)
	}
	s := &Server{svc: svc, opts: opts, log: opts.Logger, metrics: newMetrics(reg), mux: http.NewServeMux(),
		refused: newRefusedCounter(reg), origins: http.NewCrossOriginProtection()}

	// Routes that call the Service check their path, then the caller's
	// deadline (withDeadline), before the handler reads the body. POST
	// /v1/allow checks its query first and so does that itself.
	routes := []route{
		{"POST", "/v1/allow", s.allow},
		{"POST", "/v1/allow/batch", s.withDeadline(nil, s.allowBatch)},
		{"GET", "/v1/clients/{client}", s.withDeadline(checkClientPath, s.getClient)},
		{"PUT", "/v1/clients/{client}/tier", s.withDeadline(checkClientPath, s.setClientTier)},
		{"DELETE", "/v1/clients/{client}/tier", s.withDeadline(checkClientPath, s.removeClientTier)},
		{"POST", "/v1/clients/{client}/reset", s.withDeadline(checkClientPath, s.resetClient)},
		{"PUT", "/v1/tiers/{tier}", s.withDeadline(checkTierPath, s.putTier)},
		{"DELETE", "/v1/tiers/{tier}", s.withDeadline(checkTierPath, s.deleteTier)},
		{"GET", "/v1/tiers", s.withDeadline(nil, s.getTiers)},
		{"GET", "/v1/audit", s.withDeadline(nil, s.getAudit)},
		{"PUT", "/v1/default", s.withDeadline(nil, s.putDefault)},
		{"GET", "/v1/cluster", s.withDeadline(nil, s.getCluster)},
		{"GET", "/v1/routes", s.getRoutes},
		{"GET", "/healthz", s.healthz},
		{"GET", "/readyz", s.withDeadline(nil, s.readyz)},
	}
	if l, ok := svc.(Leaver); ok {
		routes = append(routes, route{"POST", "/v1/leave", func(w http.ResponseWriter, r *http.Request) error {
			ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
			defer cancel()
			if err := l.Leave(ctx); err != nil {
				return err
			}
			s.writeJSON(w, http.StatusOK, api.StatusResponse{Status: "left"})
			return nil
		}})
	}
	if b, ok := svc.(Backuper); ok {
		routes = append(routes, route{"GET", "/v1/backup", s.getBackup(b)})
	}
	if gatherer != nil {
		prom := promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{ErrorLog: slogPrinter{opts.Logger}})
		routes = append(routes, route{"GET", "/metrics", func(w http.ResponseWriter, r *http.Request) error {
			prom.ServeHTTP(w, r)
			return nil
		}})
	}
	allowed := map[string][]string{}
	var paths []string
	for _, rt := range routes {
		pattern := rt.method + " " + rt.path
		s.mux.Handle(pattern, s.instrument(pattern, s.guard(accessOf(pattern), rt.h)))
		s.patterns = append(s.patterns, pattern)
		if _, ok := allowed[rt.path]; !ok {
			paths = append(paths, rt.path)
		}
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	// A path without a method pattern catches the methods a route lacks.
	for _, p := range paths {
		methods := allowed[p]
		if slices.Contains(methods, "GET") {
			methods = append(methods, "HEAD")
		}
		allow := strings.Join(methods, ", ")
		s.mux.Handle(p, s.instrument("other "+p, s.guard(anyToken, func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Allow", allow)
			return newError(api.CodeMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s; use %s", r.Method, p, allow))
		})))
	}
	s.mux.Handle("/", s.instrument("unmatched", s.guard(anyToken, func(w http.ResponseWriter, r *http.Request) error {
		return newError(api.CodeNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})))
	return s
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// route is one method and path pattern and its handler.
type route struct {
	method, path string
	h            handlerFunc
}

// handlerFunc is a route's handler. It either writes a success answer and
// returns nil, or returns an error that mapError turns into the answer,
// having written nothing.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// instrument wraps h: it writes h's error as an error answer, counts the
// answer in quorate_http_requests_total under route, and turns a panic into
// a 500 (re-panicking http.ErrAbortHandler).
func (s *Server) instrument(route string, h handlerFunc) http.Handler {
	requests := s.metrics.requestCounter(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.ErrorContext(r.Context(), "httpapi: panic", slog.String("route", route), slog.Any("panic", p))
				if sw.status == 0 {
					s.writeError(sw, newError(api.CodeInternal, "internal error; see the node's log"))
				}
			}
			requests.observe(sw.code())
		}()
		if err := h(sw, r); err != nil {
			s.writeError(sw, s.mapError(r, err))
		}
	})
}

// statusWriter records the status written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// writeJSON writes v as the answer with status, through encoding/json.
// The decision path's answers, and errors, are appended instead (see
// encode.go).
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	setJSONHeaders(w.Header())
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		s.log.Debug("httpapi: writing answer", slog.Any("err", err))
	}
}

func (s *Server) writeError(w http.ResponseWriter, e *apiError) {
	if e.status == statusClientClosedRequest {
		// Nobody is listening; record the status for metrics only.
		if sw, ok := w.(*statusWriter); ok {
			sw.status = e.status
		}
		return
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	bp := s.bufs.get()
	detail := api.ErrorDetail{Code: e.code, Message: e.msg}
	*bp = append(appendErrorBody(*bp, &detail), '\n')
	s.writeEncoded(w, e.status, bp)
}

// callContext returns the context for a call into the Service: r's context
// with the caller's api.HeaderTimeout deadline (capped at MaxTimeout), or
// DefaultTimeout without one.
func (s *Server) callContext(r *http.Request) (context.Context, context.CancelFunc, error) {
	d := s.opts.DefaultTimeout
	if v := headerValue(r.Header, api.HeaderTimeout); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return nil, nil, badRequest(api.CodeInvalidTimeout, "header %s must be a positive whole number of milliseconds, got %q", api.HeaderTimeout, v)
		}
		d = s.opts.MaxTimeout
		if ms < d.Milliseconds() {
			d = time.Duration(ms) * time.Millisecond
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	return ctx, cancel, nil
}

// headerValue is h.Get(key) for a key already in canonical form, without
// checking it again on every request.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// slogPrinter adapts a slog.Logger to promhttp's Println logger.
type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Println(v ...any) {
	p.l.Error("httpapi: serving metrics", slog.String("err", fmt.Sprint(v...)))
}
