// Package jsonscan reads JSON text in one pass, for the bodies every
// decision travels in (the server's reading of POST /v1/allow and
// /v1/allow/batch, the client's reading of their answers), where
// encoding/json's reflection and token-by-token reading were a third of the
// CPU of either side.
//
// A Scanner only ever accepts. At the first byte it does not expect, a
// method reports false, and its caller gives the whole text to
// encoding/json instead, which either reads it the same way or names the
// fault; so a Scanner can afford to give up on text that is valid but rare
// (a string whose escapes decode to U+FFFD, invalid UTF-8), and its callers
// fuzz that they read what encoding/json reads.
package jsonscan

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A Scanner reads one JSON text. Strings it returns without escapes are
// substrings of the text, so reading a body costs one copy of it.
type Scanner struct {
	s string
	i int // the next byte to read
}

// New returns a Scanner at the start of s.
func New(s string) Scanner { return Scanner{s: s} }

// Rest is what is left to read.
func (p *Scanner) Rest() string { return p.s[p.i:] }

// Space skips white space.
func (p *Scanner) Space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// Skip skips white space and then c, reporting whether c was there.
func (p *Scanner) Skip(c byte) bool {
	p.Space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// Literal skips lit if the text goes on with it (no white space first).
func (p *Scanner) Literal(lit string) bool {
	if strings.HasPrefix(p.s[p.i:], lit) {
		p.i += len(lit)
		return true
	}
	return false
}

// End skips white space and reports whether that was all.
func (p *Scanner) End() bool {
	p.Space()
	return p.i == len(p.s)
}

// Bool reads true or false.
func (p *Scanner) Bool() (v, ok bool) {
	p.Space()
	switch {
	case p.Literal("true"):
		return true, true
	case p.Literal("false"):
		return false, true
	}
	return false, false
}

// Number reads a number and returns its text as written.
func (p *Scanner) Number() (string, bool) {
	p.Space()
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

func (p *Scanner) digits() int {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// Int reads a number written as an integer that fits an int64.
func (p *Scanner) Int() (int64, bool) {
	text, ok := p.Number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(text, 10, 64)
	return n, err == nil
}

// Count reads a whole number in its plainest spelling: at most maxDigits
// (1..19) decimal digits, without a sign, a fraction, an exponent or a
// leading zero (0 alone is one). Other spellings of the same number are
// the fallback's to read.
func (p *Scanner) Count(maxDigits int) (uint64, bool) {
	p.Space()
	start, n := p.i, uint64(0)
	for p.i < len(p.s) && p.i-start < maxDigits {
		c := p.s[p.i]
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
		p.i++
	}
	switch digits := p.i - start; {
	case digits == 0, digits > 1 && p.s[start] == '0':
		return 0, false
	case p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.' || p.s[p.i] == 'e' || p.s[p.i] == 'E'):
		return 0, false // more digits than maxDigits, or a fraction or exponent
	}
	return n, true
}

// Str reads a string of valid UTF-8 whose escapes decode to valid UTF-8
// without U+FFFD (encoding/json would hide a lone surrogate behind one).
func (p *Scanner) Str() (string, bool) {
	if !p.Skip('"') {
		return "", false
	}
	start, ascii := p.i, true
	for j := start; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			p.i = j + 1
			v := p.s[start:j]
			return v, ascii || utf8.ValidString(v)
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// escaped reads the rest of a string that opened at start-1 and holds an
// escape.
func (p *Scanner) escaped(start int) (string, bool) {
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

// Members reads an object, calling member with each member's name to read
// its value.
func (p *Scanner) Members(member func(name string) bool) bool {
	if !p.Skip('{') {
		return false
	}
	if p.Skip('}') {
		return true
	}
	for {
		name, ok := p.Str()
		if !ok || !p.Skip(':') || !member(name) {
			return false
		}
		if p.Skip('}') {
			return true
		}
		if !p.Skip(',') {
			return false
		}
	}
}
