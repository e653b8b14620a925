package httpapi

// Benchmarks of the decision path's own cost: the Server's handler in
// process (no sockets, no net/http server), in front of a Service that
// answers canned decisions at once, so what is left is decoding, calling,
// metrics and encoding. Run with
//
//	go test -run '^$' -bench . -benchmem ./server/httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// benchDecisions returns n canned decisions: mostly allowed, every fourth
// denied, in two tiers with their rates, as a busy node would answer.
func benchDecisions(n int) []fsm.Decision {
	ds := make([]fsm.Decision, n)
	for i := range ds {
		d := fsm.Decision{
			Decision:  bucket.Decision{Allowed: true, Remaining: 41 * bucket.Scale, Limit: 100, ResetAfter: 59 * int64(time.Second)},
			Tier:      "free",
			Stamp:     t0,
			Rate:      bucket.Scale,
			RateKnown: true,
		}
		if i%4 == 3 {
			d.Allowed, d.Remaining, d.RetryAfter = false, 0, 250*int64(time.Millisecond)
			d.Tier, d.Rate = bucket.DefaultTierName, bucket.Scale/4
		}
		ds[i] = d
	}
	return ds
}

// newBenchServer returns a Server on a private registry in front of a fake
// that answers canned decisions without looking at the requests.
func newBenchServer(b *testing.B, maxDecisions int) *Server {
	b.Helper()
	ds := benchDecisions(maxDecisions)
	svc := &fakeService{allow: func(_ context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
		return ds[:len(reqs)], nil
	}}
	return New(svc, Options{Registerer: prometheus.NewRegistry()})
}

// benchWriter is an http.ResponseWriter that keeps the status and
// discards the body. Its header map is cleared, not replaced, between
// requests, so the handler's own header work is what is counted.
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *benchWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}

func (w *benchWriter) reset() {
	clear(w.h)
	w.status, w.n = 0, 0
}

// rewindBody is a request body that can be read again.
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

// benchServe sends body to method path through s b.N times, reusing one
// request and one writer, and fails unless every answer has status want.
func benchServe(b *testing.B, s *Server, path, body string, want int) {
	b.Helper()
	rb := &rewindBody{}
	r := httptest.NewRequest(http.MethodPost, path, nil)
	r.Header.Set("Content-Type", "application/json")
	r.Body = rb
	r.ContentLength = int64(len(body))
	w := &benchWriter{h: http.Header{}}
	bodyBytes := []byte(body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rb.Reset(bodyBytes)
		w.reset()
		s.ServeHTTP(w, r)
		if w.status != want {
			b.Fatalf("status %d, want %d", w.status, want)
		}
	}
}

// benchBatchBody is a batch body of n requests, each with a request id.
func benchBatchBody(n int) string {
	var sb strings.Builder
	sb.WriteString(`{"requests":[`)
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"client":"client-%06d","cost":1,"request_id":"9f1c2a7e-%08d"}`, i, i)
	}
	sb.WriteString("]}")
	return sb.String()
}

const benchAllowBody = `{"client":"client-000042","cost":1,"request_id":"9f1c2a7e-00000042"}`

func BenchmarkAllow(b *testing.B) {
	b.Run("allowed", func(b *testing.B) {
		benchServe(b, newBenchServer(b, 1), "/v1/allow", benchAllowBody, http.StatusOK)
	})
	b.Run("denied429", func(b *testing.B) {
		ds := benchDecisions(4)[3:]
		svc := &fakeService{allow: func(context.Context, []fsm.AllowRequest) ([]fsm.Decision, error) { return ds, nil }}
		s := New(svc, Options{Registerer: prometheus.NewRegistry()})
		benchServe(b, s, "/v1/allow?status=429", benchAllowBody, http.StatusTooManyRequests)
	})
}

func BenchmarkAllowBatch(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			benchServe(b, newBenchServer(b, n), "/v1/allow/batch", benchBatchBody(n), http.StatusOK)
		})
	}
}

func BenchmarkDecodeAllow(b *testing.B) {
	body := []byte(benchAllowBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeAllow(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBatch(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			body := []byte(benchBatchBody(n))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeBatch(body, DefaultMaxBatch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var _ io.ReadCloser = (*rewindBody)(nil)
