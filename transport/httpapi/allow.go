package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// allow answers POST /v1/allow.
//
// A denial is a successful answer: 200 with "allowed": false. With the query
// parameter status=429 a denial is answered 429 Too Many Requests instead,
// with the same body and headers, for callers that proxy the status. The
// answer carries the IETF RateLimit headers:
//
//	RateLimit-Limit:     the capacity of the policy that decided
//	RateLimit-Remaining: whole tokens left
//	RateLimit-Reset:     seconds (rounded up) until the bucket is full; absent if it never refills
//	Retry-After:         on a denial, seconds (rounded up) until the same request would be
//	                     allowed; absent if it never will under the current policy
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
	ds, err := s.decide(ctx, []fsm.AllowRequest{req})
	if err != nil {
		return err
	}
	d := ds[0]
	setRateLimitHeaders(w.Header(), d)
	status := http.StatusOK
	if !d.Allowed {
		status = denyStatus
	}
	bp := s.bufs.get()
	out := allowResponse(d)
	*bp = append(appendAllowJSON(*bp, &out), '\n')
	s.writeEncoded(w, status, bp)
	return nil
}

// allowBatch answers POST /v1/allow/batch: one result per request, in
// order. Batches carry no RateLimit headers (their requests may be for
// different clients), and a denial is always 200.
func (s *Server) allowBatch(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	reqs, err := readAndDecode(s, r, s.opts.MaxBatchBodyBytes, s.decodeBatch)
	if err != nil {
		return err
	}
	s.metrics.batch.Observe(float64(len(reqs)))
	ds, err := s.decide(ctx, reqs)
	if err != nil {
		return err
	}
	bp := s.bufs.get()
	b := append(*bp, `{"results":[`...)
	for i, d := range ds {
		if i > 0 {
			b = append(b, ',')
		}
		out := allowResponse(d)
		b = appendAllowJSON(b, &out)
	}
	*bp = append(b, "]}\n"...)
	s.writeEncoded(w, http.StatusOK, bp)
	return nil
}

// decodeBatch is decodeBatch with the Server's Options.MaxBatch.
func (s *Server) decodeBatch(body []byte) ([]fsm.AllowRequest, error) {
	return decodeBatch(body, s.opts.MaxBatch)
}

// decide calls the Service, times it and counts the decisions.
func (s *Server) decide(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
	start := time.Now()
	ds, err := s.svc.Allow(ctx, reqs)
	s.metrics.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, err
	}
	if len(ds) != len(reqs) {
		return nil, fmt.Errorf("httpapi: service answered %d decisions for %d requests", len(ds), len(reqs))
	}
	s.metrics.observeDecisions(ds)
	return ds, nil
}

func allowResponse(d fsm.Decision) api.AllowResponse {
	return api.AllowResponse{
		Allowed:       d.Allowed,
		Remaining:     d.RemainingTokens(),
		Limit:         d.Limit,
		RetryAfterMs:  ceilDiv(d.RetryAfter, int64(time.Millisecond)),
		ResetAfterMs:  ceilDiv(d.ResetAfter, int64(time.Millisecond)),
		Tier:          d.Tier,
		StampUnixNano: d.Stamp,
		Duplicate:     d.Duplicate,

		MaybeDuplicate: d.MaybeDuplicate,
	}
}

// setRateLimitHeaders sets the RateLimit headers of an allow answer (see
// Server.allow). The keys are canonical and assigned directly; the values
// share one string and one slice backing array.
func setRateLimitHeaders(h http.Header, d fsm.Decision) {
	reset := d.ResetAfter != bucket.Never
	retry := !d.Allowed && d.RetryAfter != bucket.Never
	var num [4 * 20]byte // four int64s at most
	b := strconv.AppendInt(num[:0], d.Limit, 10)
	endLimit := len(b)
	b = strconv.AppendInt(b, d.RemainingTokens(), 10)
	endRemaining := len(b)
	if reset {
		b = strconv.AppendInt(b, ceilDiv(d.ResetAfter, int64(time.Second)), 10)
	}
	endReset := len(b)
	if retry {
		b = strconv.AppendInt(b, ceilDiv(d.RetryAfter, int64(time.Second)), 10)
	}
	nums := string(b)
	vals := make([]string, 4)
	vals[0], vals[1], vals[2], vals[3] = nums[:endLimit], nums[endLimit:endRemaining], nums[endRemaining:endReset], nums[endReset:]
	h["Ratelimit-Limit"] = vals[0:1:1]
	h["Ratelimit-Remaining"] = vals[1:2:2]
	if reset {
		h["Ratelimit-Reset"] = vals[2:3:3]
	}
	if retry {
		h["Retry-After"] = vals[3:4:4]
	}
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
