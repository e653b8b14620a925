package api

import (
	"encoding/json"
	"unicode/utf8"
)

// AppendJSONString appends s quoted as encoding/json quotes a string.
// The server writes its answers with it and the Go client its requests.
// Printable ASCII, which tier names, client ids, error codes and nearly
// every message are, is copied with only " and \ escaped; anything else (control
// characters, non-ASCII, and the characters encoding/json escapes for HTML:
// <, > and &) is left to encoding/json.
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
