package httpapi

// Every decision arrives in an allow or a batch body, so those two are read
// in one pass over their bytes by an allowScanner rather than token by
// token through encoding/json. The scanner only ever accepts: at the first
// byte it does not like it gives up without saying why, and the body goes
// to the streaming decoder (decodeAllowStream, decodeBatchStream), which
// names the fault. Refusals are therefore word for word what that decoder
// says, and the scanner can afford to give up on bodies that are valid but
// rare (an escaped member name, a cost written 2.0e0 or -0), which the
// streaming decoder then accepts.
//
// What the scanner accepts, the streaming decoder accepts with the same
// result (FuzzScanAllow and FuzzScanBatch check this). The reading itself
// is package jsonscan's, which the client's reading of answers shares.

import (
	"strconv"
	"strings"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/jsonscan"
)

// scanAllow reads the body of POST /v1/allow; ok is false if it does not
// accept the body.
func scanAllow(body []byte) (req fsm.AllowRequest, ok bool) {
	p := jsonscan.New(string(body))
	req, ok = allowObject(&p)
	return req, ok && p.End()
}

// scanBatch reads the body of POST /v1/allow/batch holding at most limit
// requests; ok is false if it does not accept the body.
func scanBatch(body []byte, limit int) (reqs []fsm.AllowRequest, ok bool) {
	p := jsonscan.New(string(body))
	if !p.Skip('{') || !p.Skip('"') || !p.Literal(`requests"`) || !p.Skip(':') || !p.Skip('[') {
		return nil, false
	}
	// Every request opens a brace, so the braces bound their number.
	reqs = make([]fsm.AllowRequest, 0, max(0, min(limit, strings.Count(p.Rest(), "{"))))
	for {
		if len(reqs) == limit {
			return nil, false
		}
		req, ok := allowObject(&p)
		if !ok {
			return nil, false
		}
		reqs = append(reqs, req)
		if p.Skip(',') {
			continue
		}
		if p.Skip(']') && p.Skip('}') && p.End() {
			return reqs, true
		}
		return nil, false
	}
}

// Members of an allow object, as bits of a set.
const (
	memberClient = 1 << iota
	memberCost
	memberRequestID
)

// allowObject reads one allow object: client required, every member at
// most once, each valid. A member name with an escape is left to the
// streaming decoder.
func allowObject(p *jsonscan.Scanner) (fsm.AllowRequest, bool) {
	req := fsm.AllowRequest{Cost: 1}
	if !p.Skip('{') {
		return req, false
	}
	var seen, has uint8
	for {
		if !p.Skip('"') {
			return req, false
		}
		var m uint8
		switch {
		case p.Literal(`client"`):
			m = memberClient
		case p.Literal(`cost"`):
			m = memberCost
		case p.Literal(`request_id"`):
			m = memberRequestID
		default:
			return req, false
		}
		if seen&m != 0 || !p.Skip(':') {
			return req, false
		}
		seen |= m
		p.Space()
		if !p.Literal("null") {
			var ok bool
			switch m {
			case memberClient:
				req.Client, ok = p.Str()
				ok = ok && req.Client != "" && api.IdentifierOK(req.Client, fsm.MaxClientLen)
			case memberCost:
				req.Cost, ok = cost(p)
			case memberRequestID:
				req.RequestID, ok = p.Str()
				ok = ok && api.IdentifierOK(req.RequestID, fsm.MaxRequestIDLen)
			}
			if !ok {
				return req, false
			}
			has |= m
		}
		if p.Skip(',') {
			continue
		}
		return req, has&memberClient != 0 && p.Skip('}')
	}
}

// cost reads a cost written as a plain whole number, 0..bucket.MaxCost.
// Other spellings of a valid cost (2.0, 2e0, -0) are left to the
// streaming decoder.
func cost(p *jsonscan.Scanner) (int64, bool) {
	n, ok := p.Count(maxCostDigits)
	return int64(n), ok && n <= bucket.MaxCost
}

var maxCostDigits = len(strconv.FormatInt(bucket.MaxCost, 10))
