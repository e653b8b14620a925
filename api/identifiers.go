package api

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// The rules of client ids and request ids, for every protocol a node
// serves: at most MaxClientLen (MaxRequestIDLen) bytes of valid UTF-8 with
// no control characters; a client id is also not empty.

// IdentifierOK reports whether s is at most max bytes of valid UTF-8
// without control characters. It allocates nothing: the decision path
// calls it for every request.
func IdentifierOK(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			rest := s[i:]
			if !utf8.ValidString(rest) {
				return false
			}
			for _, r := range rest {
				if unicode.IsControl(r) {
					return false
				}
			}
			return true
		}
		if c < 0x20 || c == 0x7f { // the ASCII controls
			return false
		}
	}
	return true
}

// IdentifierProblem says what breaks IdentifierOK's rules in s, as the
// end of a sentence that names it ("is 300 bytes long; ..."), or "" when
// nothing does.
func IdentifierProblem(s string, max int) string {
	switch {
	case IdentifierOK(s, max):
		return ""
	case len(s) > max:
		return fmt.Sprintf("is %d bytes long; at most %d are allowed", len(s), max)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	for i, c := range s {
		if unicode.IsControl(c) {
			return fmt.Sprintf("contains the control character %U at byte %d", c, i)
		}
	}
	return ""
}

// ClientProblem is IdentifierProblem for a client id, which must not be
// empty either.
func ClientProblem(client string) string {
	if client == "" {
		return "must not be empty"
	}
	return IdentifierProblem(client, MaxClientLen)
}
