package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/server/answer"
)

// allow answers POST /v1/allow.
//
// A denial is a successful answer: 200 with "allowed": false. With the query
// parameter status=429 a denial is answered 429 Too Many Requests instead,
// with the same body and headers, for callers that proxy the status. The
// answer carries the RateLimit fields (api.AllowResponse.SetHeaders: the
// trio RateLimit-Limit, -Remaining and -Reset, Retry-After on a denial, and
// the draft's RateLimit-Policy and RateLimit) and the node's routes version
// (api.HeaderRoutesVersion).
func (s *Server) allow(w http.ResponseWriter, r *http.Request) error {
	denyStatus := http.StatusOK
	if r.URL.RawQuery != "" { // parsing an empty query would still build a map
		switch q := r.URL.Query().Get("status"); q {
		case "", "200":
		case "429":
			denyStatus = http.StatusTooManyRequests
		default:
			return badRequest(api.CodeInvalidQuery, "query parameter status must be 200 or 429, got %q", q)
		}
	}
	ctx, cancel, err := s.callContext(r)
	if err != nil {
		return err
	}
	defer cancel()
	req, err := readAndDecode(s, r, s.opts.MaxBodyBytes, decodeAllow)
	if err != nil {
		return err
	}
	var one [1]api.AllowResponse
	if err := s.decide(ctx, []fsm.AllowRequest{req}, one[:]); err != nil {
		return err
	}
	out := one[0]
	if !out.Degraded { // a degraded answer knows nothing of the bucket
		out.SetHeaders(w.Header())
	}
	s.setRoutesVersion(w.Header())
	status := http.StatusOK
	if !out.Allowed {
		status = denyStatus
	}
	bp := s.bufs.get()
	*bp = append(appendAllowJSON(*bp, &out), '\n')
	s.writeEncoded(w, status, bp)
	return nil
}

// allowBatch answers POST /v1/allow/batch: one result per request, in
// order. Batches carry no RateLimit headers (their requests may be for
// different clients), only the routes version, and a denial is always 200.
func (s *Server) allowBatch(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	reqs, err := readAndDecode(s, r, s.opts.MaxBatchBodyBytes, s.decodeBatch)
	if err != nil {
		return err
	}
	s.metrics.batch.Observe(float64(len(reqs)))
	answers := make([]api.AllowResponse, len(reqs))
	if err := s.decide(ctx, reqs, answers); err != nil {
		return err
	}
	s.setRoutesVersion(w.Header())
	bp := s.bufs.get()
	b := append(*bp, `{"results":[`...)
	for i := range answers {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendAllowJSON(b, &answers[i])
	}
	*bp = append(b, "]}\n"...)
	s.writeEncoded(w, http.StatusOK, bp)
	return nil
}

// decodeBatch is decodeBatch with the Server's Options.MaxBatch.
func (s *Server) decodeBatch(body []byte) ([]fsm.AllowRequest, error) {
	return decodeBatch(body, s.opts.MaxBatch)
}

// decide calls the Service, times it, writes its answers into out (one
// per request) and counts them. When the groups cannot decide in time, it
// answers for tiers that say so instead (see degrade).
func (s *Server) decide(ctx context.Context, reqs []fsm.AllowRequest, out []api.AllowResponse) error {
	start := time.Now()
	ds, err := s.svc.Allow(ctx, reqs)
	s.metrics.duration.Observe(time.Since(start).Seconds())
	switch {
	case err != nil:
		if !answer.Degrade(reqs, err, s.svc.PolicyOf, &s.rates, out) {
			return err
		}
	case len(ds) != len(reqs):
		return fmt.Errorf("httpapi: service answered %d decisions for %d requests", len(ds), len(reqs))
	default:
		for i, d := range ds {
			out[i] = answer.Of(d, &s.rates)
		}
	}
	s.metrics.decisions.Observe(out)
	return nil
}

// routesVersionHeader is one routes version as a header value.
type routesVersionHeader struct {
	version uint64
	value   []string
}

// setRoutesVersion sets api.HeaderRoutesVersion to the Service's routes
// version. The value is built only when the version changed since the
// last answer (at a leadership change), so it allocates nothing otherwise.
func (s *Server) setRoutesVersion(h http.Header) {
	v := s.svc.RoutesVersion()
	last := s.routesVersion.Load()
	if last == nil || last.version != v {
		last = &routesVersionHeader{version: v, value: []string{strconv.FormatUint(v, 10)}}
		s.routesVersion.Store(last)
	}
	h[api.HeaderRoutesVersion] = last.value
}
