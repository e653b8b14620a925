package client

// Decision requests and answers are encoded and decoded by hand, not by
// encoding/json's reflection, which was about a third of the client's CPU
// per coalesced decision (README "Use it from your service"). The encoder
// writes byte for byte what json.Marshal writes (TestWireEncodesAsJSON).
// The decoder (package jsonscan, the server's reader of requests too) reads
// the answers the server writes; at the first byte it does not expect (an
// unknown member, null, a number written another way, invalid UTF-8) it
// gives up and the body goes to json.Unmarshal, so what it returns is
// always what json.Unmarshal would return into a zero value
// (FuzzWireDecodesAsJSON).

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/internal/jsonscan"
)

// wireEncoder is a request body that encodes itself, and says how many
// bytes that usually takes (so that the body is one allocation).
type wireEncoder interface {
	appendJSON(b []byte) []byte
	sizeHint() int
}

// wireDecoder is an answer that decodes itself (out is zero beforehand).
type wireDecoder interface{ decodeJSON(data []byte) error }

// allowBody is the body of POST /v1/allow.
type allowBody struct{ r *api.AllowRequest }

func (a allowBody) appendJSON(b []byte) []byte { return appendAllowRequest(b, a.r) }
func (a allowBody) sizeHint() int              { return sizeOfAllowRequest(a.r) }

// batchBody is the body of POST /v1/allow/batch.
type batchBody []api.AllowRequest

func (reqs batchBody) appendJSON(b []byte) []byte {
	if reqs == nil {
		return append(b, `{"requests":null}`...)
	}
	b = append(b, `{"requests":[`...)
	for i := range reqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendAllowRequest(b, &reqs[i])
	}
	return append(b, "]}"...)
}

func (reqs batchBody) sizeHint() int {
	n := len(`{"requests":null}`)
	for i := range reqs {
		n += sizeOfAllowRequest(&reqs[i]) + 1
	}
	return n
}

// sizeOfAllowRequest is what appendAllowRequest takes for r when nothing
// in its strings needs escaping.
func sizeOfAllowRequest(r *api.AllowRequest) int {
	n := len(`{"client":""}`) + len(r.Client)
	if r.Cost != nil {
		n += len(`,"cost":`) + 20
	}
	if r.RequestID != "" {
		n += len(`,"request_id":""`) + len(r.RequestID)
	}
	return n
}

// appendAllowRequest appends r as json.Marshal encodes an api.AllowRequest.
func appendAllowRequest(b []byte, r *api.AllowRequest) []byte {
	b = append(b, `{"client":`...)
	b = api.AppendJSONString(b, r.Client)
	if r.Cost != nil {
		b = append(b, `,"cost":`...)
		b = strconv.AppendInt(b, *r.Cost, 10)
	}
	if r.RequestID != "" {
		b = append(b, `,"request_id":`...)
		b = api.AppendJSONString(b, r.RequestID)
	}
	return append(b, '}')
}

// allowAnswer is the answer of POST /v1/allow.
type allowAnswer struct{ api.AllowResponse }

func (a *allowAnswer) decodeJSON(data []byte) error {
	return decodeWire(data, &a.AllowResponse, scanAllowResponse)
}

// batchAnswer is the answer of POST /v1/allow/batch.
type batchAnswer struct{ api.BatchResponse }

func (a *batchAnswer) decodeJSON(data []byte) error {
	return decodeWire(data, &a.BatchResponse, scanBatchResponse)
}

// decodeWire reads data into the zero *out with scan, or, where scan gives
// up, with json.Unmarshal into a fresh zero value.
func decodeWire[T any](data []byte, out *T, scan func(*jsonscan.Scanner, *T) bool) error {
	p := jsonscan.New(string(data))
	if scan(&p, out) && p.End() {
		return nil
	}
	var zero T
	*out = zero
	return json.Unmarshal(data, out)
}

// Shared targets of AllowResponse.WouldAllow, so that decoding it
// allocates nothing; nothing writes through the pointer.
var (
	decodedTrue  = true
	decodedFalse = false
)

// scanAllowResponse reads an api.AllowResponse. A member it does not know
// is json.Unmarshal's to skip (or to match without regard to case).
func scanAllowResponse(p *jsonscan.Scanner, r *api.AllowResponse) bool {
	return p.Members(func(name string) (ok bool) {
		switch name {
		case "allowed":
			r.Allowed, ok = p.Bool()
		case "remaining":
			r.Remaining, ok = p.Int()
		case "limit":
			r.Limit, ok = p.Int()
		case "retry_after_ms":
			r.RetryAfterMs, ok = p.Int()
		case "reset_after_ms":
			r.ResetAfterMs, ok = p.Int()
		case "tier":
			r.Tier, ok = p.Str()
		case "stamp_unix_nano":
			r.StampUnixNano, ok = p.Int()
		case "refill_per_second":
			var text string
			text, ok = p.Number()
			r.RefillPerSecond = json.Number(text)
		case "window_seconds":
			r.WindowSeconds, ok = p.Int()
		case "duplicate":
			r.Duplicate, ok = p.Bool()
		case "maybe_duplicate":
			r.MaybeDuplicate, ok = p.Bool()
		case "degraded":
			r.Degraded, ok = p.Bool()
		case "shadow":
			r.Shadow, ok = p.Bool()
		case "would_allow":
			var v bool
			v, ok = p.Bool()
			r.WouldAllow = &decodedFalse
			if v {
				r.WouldAllow = &decodedTrue
			}
		}
		return ok // an unknown member: json.Unmarshal's to skip
	})
}

// scanBatchResponse reads an api.BatchResponse.
func scanBatchResponse(p *jsonscan.Scanner, r *api.BatchResponse) bool {
	return p.Members(func(name string) bool {
		if name != "results" || r.Results != nil || !p.Skip('[') {
			return false
		}
		// Every result opens a brace, so the braces bound their number.
		results := make([]api.AllowResponse, 0, strings.Count(p.Rest(), "{"))
		if !p.Skip(']') {
			for {
				results = append(results, api.AllowResponse{})
				if !scanAllowResponse(p, &results[len(results)-1]) {
					return false
				}
				if p.Skip(']') {
					break
				}
				if !p.Skip(',') {
					return false
				}
			}
		}
		r.Results = results
		return true
	})
}
