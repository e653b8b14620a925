package httpapi

// The answers on the decision path are written by appending bytes, not by
// encoding/json's reflection: the output is byte for byte what
// json.NewEncoder(w).Encode would write for the same value (the tests
// compare the two), so the typed Client and any other JSON reader see no
// difference.

import (
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/quorate/quorate/api"
)

// bufferPool recycles the byte buffers request bodies are read into and
// answers are encoded into. The zero value is ready to use.
type bufferPool struct{ p sync.Pool }

// maxPooledBuffer bounds the buffers kept for reuse, so one huge batch does
// not pin its memory for the life of the pool.
const maxPooledBuffer = 4 << 20

func (bp *bufferPool) get() *[]byte {
	if b, ok := bp.p.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 1024)
	return &b
}

func (bp *bufferPool) put(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		*b = (*b)[:0]
		bp.p.Put(b)
	}
}

// Header values the answers share. net/http and the standard middleware
// only read or replace header slices, never write into them, so one slice
// serves every answer and setting a header allocates nothing.
var (
	headerJSON    = []string{"application/json"}
	headerNoStore = []string{"no-store"}
)

// setJSONHeaders sets the headers of every JSON answer. The keys are in
// canonical form, so they are assigned directly rather than through
// Header.Set.
func setJSONHeaders(h http.Header) {
	h["Content-Type"] = headerJSON
	h["Cache-Control"] = headerNoStore
}

// writeEncoded writes the JSON in *bp as the answer with status and gives
// the buffer back to the pool.
func (s *Server) writeEncoded(w http.ResponseWriter, status int, bp *[]byte) {
	setJSONHeaders(w.Header())
	w.WriteHeader(status)
	if _, err := w.Write(*bp); err != nil {
		s.log.Debug("httpapi: writing answer", slog.Any("err", err))
	}
	s.bufs.put(bp)
}

// appendAllowJSON appends r as encoding/json encodes an api.AllowResponse:
// fields in declaration order, RefillPerSecond omitted when empty and
// written as the number it holds (it must be a valid JSON number, as
// bucket.FormatRate writes), WindowSeconds omitted when 0, Duplicate,
// MaybeDuplicate, Degraded and Shadow when false and WouldAllow when nil.
func appendAllowJSON(b []byte, r *api.AllowResponse) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, r.Allowed)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, r.Remaining, 10)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, r.Limit, 10)
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, r.RetryAfterMs, 10)
	b = append(b, `,"reset_after_ms":`...)
	b = strconv.AppendInt(b, r.ResetAfterMs, 10)
	b = append(b, `,"tier":`...)
	b = api.AppendJSONString(b, r.Tier)
	b = append(b, `,"stamp_unix_nano":`...)
	b = strconv.AppendInt(b, r.StampUnixNano, 10)
	if r.RefillPerSecond != "" {
		b = append(b, `,"refill_per_second":`...)
		b = append(b, r.RefillPerSecond...)
	}
	if r.WindowSeconds != 0 {
		b = append(b, `,"window_seconds":`...)
		b = strconv.AppendInt(b, r.WindowSeconds, 10)
	}
	if r.Duplicate {
		b = append(b, `,"duplicate":true`...)
	}
	if r.MaybeDuplicate {
		b = append(b, `,"maybe_duplicate":true`...)
	}
	if r.Degraded {
		b = append(b, `,"degraded":true`...)
	}
	if r.Shadow {
		b = append(b, `,"shadow":true`...)
	}
	if r.WouldAllow != nil {
		b = append(b, `,"would_allow":`...)
		b = strconv.AppendBool(b, *r.WouldAllow)
	}
	return append(b, '}')
}

// appendErrorBody appends api.ErrorBody{Error: *e} as encoding/json encodes it.
func appendErrorBody(b []byte, e *api.ErrorDetail) []byte {
	b = append(b, `{"error":{"code":`...)
	b = api.AppendJSONString(b, string(e.Code))
	b = append(b, `,"message":`...)
	b = api.AppendJSONString(b, e.Message)
	return append(b, `}}`...)
}
