package client

// Decision requests and answers are encoded and decoded by hand, not by
// encoding/json's reflection, which was about a third of the client's CPU
// per coalesced decision (README "Use it from your service"). The encoder
// writes byte for byte what json.Marshal writes (TestWireEncodesAsJSON).
// The decoder reads the answers the server writes; at the first byte it
// does not expect (an escape, an unknown member, null, a number written
// another way, invalid UTF-8) it gives up and the body goes to
// json.Unmarshal, so what it returns is always what json.Unmarshal would
// return into a zero value (FuzzWireDecodesAsJSON).

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/quorate/quorate/api"
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
	return decodeWire(data, &a.AllowResponse, (*wireScanner).allowResponse)
}

// batchAnswer is the answer of POST /v1/allow/batch.
type batchAnswer struct{ api.BatchResponse }

func (a *batchAnswer) decodeJSON(data []byte) error {
	return decodeWire(data, &a.BatchResponse, (*wireScanner).batchResponse)
}

// decodeWire reads data into the zero *out with scan, or, where scan gives
// up, with json.Unmarshal into a fresh zero value.
func decodeWire[T any](data []byte, out *T, scan func(*wireScanner, *T) bool) error {
	p := wireScanner{s: string(data)}
	if scan(&p, out) && p.end() {
		return nil
	}
	var zero T
	*out = zero
	return json.Unmarshal(data, out)
}

// wireScanner reads one answer in one pass. Strings it returns are
// substrings of s: an answer costs one copy of its body.
type wireScanner struct {
	s string
	i int // the next byte to read
}

func (p *wireScanner) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// skip reads c after any white space.
func (p *wireScanner) skip(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *wireScanner) end() bool {
	p.space()
	return p.i == len(p.s)
}

// str reads a string without escapes or control characters, of valid
// UTF-8.
func (p *wireScanner) str() (string, bool) {
	if !p.skip('"') {
		return "", false
	}
	start, ascii := p.i, true
	for ; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			v := p.s[start:p.i]
			p.i++
			return v, ascii || utf8.ValidString(v)
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// number reads a JSON number and returns its text.
func (p *wireScanner) number() (string, bool) {
	p.space()
	start := p.i
	if p.i < len(p.s) && p.s[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case p.digits() == 0:
		return "", false
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return "", false
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return "", false
		}
	}
	return p.s[start:p.i], true
}

func (p *wireScanner) digits() int {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// integer reads a number written as an integer that fits an int64.
func (p *wireScanner) integer() (int64, bool) {
	text, ok := p.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(text, 10, 64)
	return n, err == nil
}

// boolean reads true or false.
func (p *wireScanner) boolean() (v, ok bool) {
	p.space()
	switch rest := p.s[p.i:]; {
	case len(rest) >= 4 && rest[:4] == "true":
		p.i += 4
		return true, true
	case len(rest) >= 5 && rest[:5] == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// members reads an object, calling member for each member's name; member
// reads the value.
func (p *wireScanner) members(member func(name string) bool) bool {
	if !p.skip('{') {
		return false
	}
	if p.skip('}') {
		return true
	}
	for {
		name, ok := p.str()
		if !ok || !p.skip(':') || !member(name) {
			return false
		}
		if p.skip('}') {
			return true
		}
		if !p.skip(',') {
			return false
		}
	}
}

// Shared targets of AllowResponse.WouldAllow, so that decoding it
// allocates nothing; nothing writes through the pointer.
var (
	decodedTrue  = true
	decodedFalse = false
)

func (p *wireScanner) allowResponse(r *api.AllowResponse) bool {
	return p.members(func(name string) (ok bool) {
		switch name {
		case "allowed":
			r.Allowed, ok = p.boolean()
		case "remaining":
			r.Remaining, ok = p.integer()
		case "limit":
			r.Limit, ok = p.integer()
		case "retry_after_ms":
			r.RetryAfterMs, ok = p.integer()
		case "reset_after_ms":
			r.ResetAfterMs, ok = p.integer()
		case "tier":
			r.Tier, ok = p.str()
		case "stamp_unix_nano":
			r.StampUnixNano, ok = p.integer()
		case "refill_per_second":
			var text string
			text, ok = p.number()
			r.RefillPerSecond = json.Number(text)
		case "window_seconds":
			r.WindowSeconds, ok = p.integer()
		case "duplicate":
			r.Duplicate, ok = p.boolean()
		case "maybe_duplicate":
			r.MaybeDuplicate, ok = p.boolean()
		case "degraded":
			r.Degraded, ok = p.boolean()
		case "shadow":
			r.Shadow, ok = p.boolean()
		case "would_allow":
			var v bool
			v, ok = p.boolean()
			r.WouldAllow = &decodedFalse
			if v {
				r.WouldAllow = &decodedTrue
			}
		}
		return ok // an unknown member: json.Unmarshal's to skip
	})
}

func (p *wireScanner) batchResponse(r *api.BatchResponse) bool {
	return p.members(func(name string) bool {
		if name != "results" || r.Results != nil || !p.skip('[') {
			return false
		}
		// Every result opens a brace, so the braces bound their number.
		results := make([]api.AllowResponse, 0, countBraces(p.s[p.i:]))
		if !p.skip(']') {
			for {
				results = append(results, api.AllowResponse{})
				if !p.allowResponse(&results[len(results)-1]) {
					return false
				}
				if p.skip(']') {
					break
				}
				if !p.skip(',') {
					return false
				}
			}
		}
		r.Results = results
		return true
	})
}

func countBraces(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '{' {
			n++
		}
	}
	return n
}
