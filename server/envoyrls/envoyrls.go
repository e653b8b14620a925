// Package envoyrls serves Envoy's rate-limit service,
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, over gRPC
// (README "Envoy and Istio"), so that Envoy, Istio, Contour or Emissary
// ask quorate with no code of their own.
//
// Each descriptor of a request is one decision, made like POST
// /v1/allow/batch makes it: for client id
// "<domain>/<key1>=<value1>/<key2>=<value2>..." (entries in request
// order), at cost hits_addend (the descriptor's, else the request's; 0 is
// 1), by the policy of the client's tier, the default for a client
// without one. The answer per descriptor is OK or OVER_LIMIT with
// current_limit, limit_remaining and duration_until_reset; overall_code is
// OVER_LIMIT if any descriptor is, and response_headers_to_add carries the
// RateLimit fields of the most constrained descriptor. Errors are the
// gRPC codes of the one error table (api.Lookup).
package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/server/answer"
)

// MaxDescriptors is the most descriptors one request may carry, as many
// as a batch of the HTTP API.
const MaxDescriptors = 1000

// Service is what the rate-limit service needs from a node; *cluster.Node
// satisfies it.
type Service interface {
	// Allow decides reqs and returns one decision per request, in order.
	// Requests have already been validated (decisions).
	Allow(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error)
	// PolicyOf returns the tier and policy client is decided by, as the
	// node knows them without asking anyone (for when_unavailable).
	PolicyOf(client string) (string, bucket.Policy)
}

// Authorizer says what the token of a call may do, from its
// "authorization" metadata ("Bearer <token>"): known reports that it
// names a known token, decide that the token's role may ask for
// decisions. *httpapi.Authenticator satisfies it.
type Authorizer interface {
	MayDecide(authorization string) (known, decide bool)
}

// Options configure a Server.
type Options struct {
	// Auth, if set, requires every call to carry a token that may decide
	// (the decide or admin role), as the HTTP API's decision routes do.
	Auth Authorizer
	// Timeout bounds a call without a deadline of its own (5 s if zero),
	// like the HTTP API's default.
	Timeout time.Duration
	// Registerer, if set, is where decisions are counted, in
	// quorate_decisions_total with the HTTP API's (answer.Decisions).
	Registerer prometheus.Registerer
}

// Server is the rate-limit service.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer
	svc       Service
	opts      Options
	rates     answer.Rates
	decisions *answer.Decisions // nil without opts.Registerer
}

// New returns the service of svc.
func New(svc Service, opts Options) *Server {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	s := &Server{svc: svc, opts: opts}
	if opts.Registerer != nil {
		s.decisions = answer.NewDecisions(opts.Registerer)
	}
	return s
}

// Register adds s to a gRPC server.
func (s *Server) Register(g *grpc.Server) { rlsv3.RegisterRateLimitServiceServer(g, s) }

// ShouldRateLimit decides every descriptor of req.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	reqs, err := decisions(req)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
	}
	out := make([]api.AllowResponse, len(reqs))
	ds, err := s.svc.Allow(ctx, reqs)
	switch {
	case err != nil:
		if !answer.Degrade(reqs, err, s.svc.PolicyOf, &s.rates, out) {
			return nil, statusOf(err)
		}
	case len(ds) != len(reqs):
		return nil, status.Errorf(codes.Internal, "the service answered %d decisions for %d descriptors", len(ds), len(reqs))
	default:
		for i, d := range ds {
			out[i] = answer.Of(d, &s.rates)
		}
	}
	if s.decisions != nil {
		s.decisions.Observe(out)
	}
	return response(out), nil
}

// authorize refuses a call whose token may not decide.
func (s *Server) authorize(ctx context.Context) error {
	if s.opts.Auth == nil {
		return nil
	}
	// ValueFromIncomingContext, not FromIncomingContext: that one copies
	// every key and value of the call's metadata (about 1% of a node's
	// CPU under Envoy's load).
	var authorization string
	if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) > 0 {
		authorization = v[0]
	}
	known, decide := s.opts.Auth.MayDecide(authorization)
	switch {
	case !known:
		return status.Error(codes.Unauthenticated, "send a known token as the authorization metadata: Bearer <token>")
	case !decide:
		return status.Error(codes.PermissionDenied, "the token's role may not ask for decisions; use a decide or admin token")
	}
	return nil
}

// decisions turns req into one decision request per descriptor, or
// refuses it with INVALID_ARGUMENT saying what is wrong.
func decisions(req *rlsv3.RateLimitRequest) ([]fsm.AllowRequest, error) {
	bad := func(format string, args ...any) error {
		return status.Errorf(codes.InvalidArgument, format, args...)
	}
	switch n := len(req.GetDescriptors()); {
	case req.GetDomain() == "":
		return nil, bad("domain must not be empty")
	case n == 0:
		return nil, bad("a request needs at least one descriptor")
	case n > MaxDescriptors:
		return nil, bad("%d descriptors, at most %d in one request", n, MaxDescriptors)
	}
	reqs := make([]fsm.AllowRequest, 0, len(req.GetDescriptors()))
	for i, d := range req.GetDescriptors() {
		client, err := clientID(req.GetDomain(), d)
		if err != nil {
			return nil, bad("descriptor %d: %v", i, err)
		}
		cost := uint64(req.GetHitsAddend())
		if h := d.GetHitsAddend(); h != nil {
			cost = h.GetValue()
		}
		switch {
		case d.GetIsNegativeHits():
			return nil, bad("descriptor %d: is_negative_hits: quorate never gives tokens back", i)
		case d.GetLimit() != nil:
			return nil, bad("descriptor %d: a limit override; quorate decides by the client's tier (PUT /v1/tiers, PUT /v1/clients/{client}/tier)", i)
		case cost > bucket.MaxCost:
			return nil, bad("descriptor %d: hits_addend %d, at most %d", i, cost, int64(bucket.MaxCost))
		case cost == 0:
			cost = 1
		}
		reqs = append(reqs, fsm.AllowRequest{Client: client, Cost: int64(cost)})
	}
	return reqs, nil
}

// clientID is the client id of descriptor d in domain:
// "<domain>/<key1>=<value1>/<key2>=<value2>...".
func clientID(domain string, d *ratelimitv3.RateLimitDescriptor) (string, error) {
	if len(d.GetEntries()) == 0 {
		return "", fmt.Errorf("no entries")
	}
	var b strings.Builder
	b.WriteString(domain)
	for j, e := range d.GetEntries() {
		if e.GetKey() == "" {
			return "", fmt.Errorf("entry %d has an empty key", j)
		}
		b.WriteByte('/')
		b.WriteString(e.GetKey())
		b.WriteByte('=')
		b.WriteString(e.GetValue())
	}
	id := b.String()
	if problem := api.ClientProblem(id); problem != "" {
		return "", fmt.Errorf("its client id %q %s", truncate(id, 80), problem)
	}
	return id, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// statusOf is err as a gRPC status, by the error table.
func statusOf(err error) error {
	if e, ok := cluster.Classify(err); ok {
		if m, ok := api.Lookup(e.Code()); ok {
			return status.Error(codes.Code(m.GRPC), err.Error())
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "the deadline passed before the decision was applied: it may have been made")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// headersOf is Envoy's header list of the RateLimit fields the HTTP API
// writes on the same answer (api.AllowResponse.SetHeaders), in its order.
func headersOf(r api.AllowResponse) []*corev3.HeaderValue {
	var buf [6]api.Field
	fields := r.AppendFields(buf[:0])
	vals := make([]corev3.HeaderValue, len(fields))
	out := make([]*corev3.HeaderValue, len(fields))
	for i, f := range fields {
		vals[i].Key, vals[i].Value = f.Name, f.Value
		out[i] = &vals[i]
	}
	return out
}

func durationOf(ms int64) *durationpb.Duration {
	if ms < 0 {
		return nil // never: Envoy reads no duration as none
	}
	return durationpb.New(time.Duration(ms) * time.Millisecond)
}
