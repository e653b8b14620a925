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
// result (FuzzScanAllow and FuzzScanBatch check this).

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// allowScanner reads one body. Unescaped strings it returns are substrings
// of s, so a whole batch costs one copy of its body.
type allowScanner struct {
	s string
	i int // the next byte to read
}

// scanAllow reads the body of POST /v1/allow; ok is false if it does not
// accept the body.
func scanAllow(body []byte) (req fsm.AllowRequest, ok bool) {
	p := allowScanner{s: string(body)}
	req, ok = p.allowObject()
	return req, ok && p.end()
}

// scanBatch reads the body of POST /v1/allow/batch holding at most limit
// requests; ok is false if it does not accept the body.
func scanBatch(body []byte, limit int) (reqs []fsm.AllowRequest, ok bool) {
	p := allowScanner{s: string(body)}
	if !p.skip('{') || !p.skip('"') || !p.literal(`requests"`) || !p.skip(':') || !p.skip('[') {
		return nil, false
	}
	// Every request opens a brace, so the braces bound their number.
	reqs = make([]fsm.AllowRequest, 0, max(0, min(limit, strings.Count(p.s, "{")-1)))
	for {
		if len(reqs) == limit {
			return nil, false
		}
		req, ok := p.allowObject()
		if !ok {
			return nil, false
		}
		reqs = append(reqs, req)
		if p.skip(',') {
			continue
		}
		if p.skip(']') && p.skip('}') && p.end() {
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
// most once, each valid.
func (p *allowScanner) allowObject() (fsm.AllowRequest, bool) {
	req := fsm.AllowRequest{Cost: 1}
	if !p.skip('{') {
		return req, false
	}
	var seen, has uint8
	for {
		if !p.skip('"') {
			return req, false
		}
		var m uint8
		switch {
		case p.literal(`client"`):
			m = memberClient
		case p.literal(`cost"`):
			m = memberCost
		case p.literal(`request_id"`):
			m = memberRequestID
		default:
			return req, false
		}
		if seen&m != 0 || !p.skip(':') {
			return req, false
		}
		seen |= m
		p.space()
		if !p.literal("null") {
			var ok bool
			switch m {
			case memberClient:
				req.Client, ok = p.str()
				ok = ok && req.Client != "" && api.IdentifierOK(req.Client, fsm.MaxClientLen)
			case memberCost:
				req.Cost, ok = p.cost()
			case memberRequestID:
				req.RequestID, ok = p.str()
				ok = ok && api.IdentifierOK(req.RequestID, fsm.MaxRequestIDLen)
			}
			if !ok {
				return req, false
			}
			has |= m
		}
		if p.skip(',') {
			continue
		}
		return req, has&memberClient != 0 && p.skip('}')
	}
}

// space skips JSON white space.
func (p *allowScanner) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// skip skips white space and then c, reporting whether c was there.
func (p *allowScanner) skip(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// literal skips lit if the input continues with it.
func (p *allowScanner) literal(lit string) bool {
	if strings.HasPrefix(p.s[p.i:], lit) {
		p.i += len(lit)
		return true
	}
	return false
}

// end skips trailing white space and reports whether that is all there was.
func (p *allowScanner) end() bool {
	p.space()
	return p.i == len(p.s)
}

// cost reads a cost written as a plain whole number, 0..bucket.MaxCost.
// Other spellings of a valid cost (2.0, 2e0, -0) are left to the
// streaming decoder.
func (p *allowScanner) cost() (int64, bool) {
	const maxDigits = 10 // bucket.MaxCost has 10
	start, n := p.i, int64(0)
	for p.i < len(p.s) && p.i-start <= maxDigits {
		c := p.s[p.i]
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > maxDigits || (digits > 1 && p.s[start] == '0') || n > bucket.MaxCost {
		return 0, false
	}
	return n, true
}

// str reads a string that is valid UTF-8 and whose escapes decode to valid
// UTF-8 without U+FFFD (encoding/json would hide a lone surrogate behind
// one; the streaming decoder refuses it).
func (p *allowScanner) str() (string, bool) {
	if p.i >= len(p.s) || p.s[p.i] != '"' {
		return "", false
	}
	start := p.i + 1
	ascii := true
	for j := start; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			p.i = j + 1
			v := p.s[start:j]
			return v, ascii || utf8.ValidString(v)
		case c == '\\':
			return p.escapedStr(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// escapedStr reads the rest of a string that opened at start-1 and holds
// an escape.
func (p *allowScanner) escapedStr(start int) (string, bool) {
	b := make([]byte, 0, 64)
	for j := start; j < len(p.s); {
		c := p.s[j]
		switch {
		case c == '"':
			p.i = j + 1
			return string(b), utf8.ValidString(p.s[start:j])
		case c < 0x20:
			return "", false
		case c != '\\':
			b = append(b, c)
			j++
			continue
		}
		if j+1 >= len(p.s) {
			return "", false
		}
		switch p.s[j+1] {
		case '"', '\\', '/':
			b = append(b, p.s[j+1])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(p.s[j+2:])
			j += 6
			if utf16.IsSurrogate(r) {
				var r2 rune = -1
				if strings.HasPrefix(p.s[j:], `\u`) {
					r2 = hex4(p.s[j+2:])
				}
				r = utf16.DecodeRune(r, r2)
				j += 6
			}
			if r < 0 || r == utf8.RuneError {
				return "", false
			}
			b = utf8.AppendRune(b, r)
			continue
		default:
			return "", false
		}
		j += 2
	}
	return "", false
}

// hex4 decodes the four hex digits s starts with, or returns -1.
func hex4(s string) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
