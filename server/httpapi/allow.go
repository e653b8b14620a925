package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/server/fallback"
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
		if !s.degrade(reqs, err, out) {
			return err
		}
	case len(ds) != len(reqs):
		return fmt.Errorf("httpapi: service answered %d decisions for %d requests", len(ds), len(reqs))
	default:
		for i, d := range ds {
			out[i] = s.allowResponse(d)
		}
	}
	s.metrics.observeAnswers(out)
	return nil
}

// degrade answers reqs in out without a decision, and reports true, when
// their groups could not decide in time and every request's tier says
// "when_unavailable": "allow" (fallback.Degrade).
func (s *Server) degrade(reqs []fsm.AllowRequest, err error, out []api.AllowResponse) bool {
	if !fallback.Undecided(err) {
		return false
	}
	clients := make([]string, len(reqs))
	for i, r := range reqs {
		clients[i] = r.Client
	}
	return fallback.Degrade(clients, err, s.svc.PolicyOf, out)
}

// allowResponse is d as the API answers it.
func (s *Server) allowResponse(d fsm.Decision) api.AllowResponse {
	out := api.AllowResponse{
		Allowed:       d.Allowed,
		Remaining:     d.RemainingTokens(),
		Limit:         d.Limit,
		RetryAfterMs:  ceilDiv(d.RetryAfter, int64(time.Millisecond)),
		ResetAfterMs:  ceilDiv(d.ResetAfter, int64(time.Millisecond)),
		Tier:          d.Tier,
		StampUnixNano: d.Stamp,
		Duplicate:     d.Duplicate,

		MaybeDuplicate: d.MaybeDuplicate,
		WindowSeconds:  d.Window / bucket.Second,
	}
	if d.RateKnown && d.Window == 0 {
		out.RefillPerSecond = s.rates.get(d.Rate)
	}
	if d.Shadow {
		out.SetShadow(d.Allowed)
	}
	return out
}

// rateStrings remembers the decimal form of the refill rates answered
// (bucket.FormatRate), so that writing one allocates nothing after the
// first time: a cluster has a handful of policies. It is a fixed table of
// slots, each holding the last rate that hashed to it, safe for concurrent
// use; the zero value is empty.
type rateStrings struct {
	slots [64]atomic.Pointer[rateString]
}

type rateString struct {
	rate int64
	s    json.Number
}

func (c *rateStrings) get(rate int64) json.Number {
	slot := &c.slots[(uint64(rate)*0x9e3779b97f4a7c15)>>58] // Fibonacci hashing: the top 6 bits
	if e := slot.Load(); e != nil && e.rate == rate {
		return e.s
	}
	e := &rateString{rate: rate, s: json.Number(bucket.FormatRate(rate))}
	slot.Store(e)
	return e.s
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

// ceilDiv returns ns/unit rounded up, for ns >= 0, and maps bucket.Never
// (-1) to -1. It does not overflow for any int64.
func ceilDiv(ns, unit int64) int64 {
	if ns == bucket.Never {
		return bucket.Never
	}
	q := ns / unit
	if ns%unit != 0 {
		q++
	}
	return q
}
