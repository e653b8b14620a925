package httpapi

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"unicode"
)

// API authentication (README "Security"; DESIGN §7 "API security").
//
// Callers send "Authorization: Bearer <token>". A node knows no tokens,
// only their SHA-256, from an auth file:
//
//	{"tokens": [{"name": "web", "role": "decide", "sha256": "<64 hex digits>"}]}
//
// so the file is not a secret worth stealing. Each token has one Role; the
// route table in access.go says which roles may call which route.

// Role is what a token may do.
type Role string

// Roles. Admin may call every route; see routeAccess for the others.
const (
	// RoleDecide may ask for decisions: POST /v1/allow, POST
	// /v1/allow/batch, and GET /v1/clients/{client}.
	RoleDecide Role = "decide"
	// RoleRead may call every GET route, /metrics included.
	RoleRead Role = "read"
	// RoleAdmin may call every route: configuration changes, tier
	// assignments, POST /v1/leave.
	RoleAdmin Role = "admin"
)

// Roles lists the valid roles.
var Roles = []Role{RoleDecide, RoleRead, RoleAdmin}

func (r Role) valid() bool {
	return r == RoleDecide || r == RoleRead || r == RoleAdmin
}

// AuthFile is the content of an auth file (`quorate serve --auth-file`).
type AuthFile struct {
	Tokens []TokenEntry `json:"tokens"`
}

// TokenEntry is one token of an auth file: a name for logs and metrics,
// its role, and the hex SHA-256 of the token (HashToken).
type TokenEntry struct {
	Name   string `json:"name"`
	Role   Role   `json:"role"`
	SHA256 string `json:"sha256"`
}

// MaxTokenNameLen bounds a token's name.
const MaxTokenNameLen = 64

// Validate checks one entry: a non-empty printable name of at most
// MaxTokenNameLen bytes, a known role, and 64 hex digits of hash.
func (e TokenEntry) Validate() error {
	if e.Name == "" || len(e.Name) > MaxTokenNameLen {
		return fmt.Errorf("token name must be 1 to %d bytes, got %q", MaxTokenNameLen, e.Name)
	}
	for _, c := range e.Name {
		if !unicode.IsPrint(c) || unicode.IsSpace(c) {
			return fmt.Errorf("token name %q: only printable characters without spaces", e.Name)
		}
	}
	if !e.Role.valid() {
		return fmt.Errorf("token %q: role must be one of decide, read, admin, got %q", e.Name, e.Role)
	}
	if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("token %q: sha256 must be 64 hex digits (quorate token new prints it)", e.Name)
	}
	return nil
}

// ParseAuthFile decodes and checks an auth file: one JSON object, no
// unknown fields, at least one token, every entry valid (Validate), and no
// name or hash given twice.
func ParseAuthFile(data []byte) (AuthFile, error) {
	var f AuthFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return AuthFile{}, fmt.Errorf("not an auth file: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return AuthFile{}, errors.New("not an auth file: data after the JSON object")
	}
	if len(f.Tokens) == 0 {
		return AuthFile{}, errors.New(`no tokens: add one with "quorate token new --name NAME --role ROLE --auth-file FILE"`)
	}
	names, sums := map[string]bool{}, map[string]bool{}
	for _, e := range f.Tokens {
		if err := e.Validate(); err != nil {
			return AuthFile{}, err
		}
		sum := strings.ToLower(e.SHA256)
		if names[e.Name] || sums[sum] {
			return AuthFile{}, fmt.Errorf("token %q: its name or hash appears more than once", e.Name)
		}
		names[e.Name], sums[sum] = true, true
	}
	return f, nil
}

// ReadAuthFile reads and parses the auth file at path (ParseAuthFile).
func ReadAuthFile(path string) (AuthFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return AuthFile{}, err
	}
	f, err := ParseAuthFile(data)
	if err != nil {
		return AuthFile{}, fmt.Errorf("auth file %s: %w", path, err)
	}
	return f, nil
}

// HashToken is the hex SHA-256 of token, as an auth file holds it.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenPrefix starts every token NewToken makes, so that secret scanners
// and people can recognise one.
const TokenPrefix = "qrt_"

// NewToken returns a new random token: TokenPrefix and 32 random bytes in
// unpadded base64url (256 bits, so the SHA-256 in the auth file needs no
// salt or slow hash).
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Authenticator knows the tokens of an auth file. It is safe for
// concurrent use; Replace swaps the tokens (a reload) atomically.
type Authenticator struct {
	tokens atomic.Pointer[[]knownToken]
}

// knownToken is one TokenEntry ready to compare.
type knownToken struct {
	name string
	role Role
	sum  [sha256.Size]byte
}

// NewAuthenticator returns an Authenticator for the tokens of f, which
// must be valid (as ParseAuthFile returns it).
func NewAuthenticator(f AuthFile) (*Authenticator, error) {
	a := &Authenticator{}
	if err := a.Replace(f); err != nil {
		return nil, err
	}
	return a, nil
}

// Replace makes f's tokens the only ones known; requests already past the
// check are not affected. On error the tokens stay as they were.
func (a *Authenticator) Replace(f AuthFile) error {
	if len(f.Tokens) == 0 {
		return errors.New("httpapi: an Authenticator needs at least one token")
	}
	known := make([]knownToken, 0, len(f.Tokens))
	for _, e := range f.Tokens {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("httpapi: %w", err)
		}
		k := knownToken{name: e.Name, role: e.Role}
		_, _ = hex.Decode(k.sum[:], []byte(e.SHA256)) // Validate checked it
		known = append(known, k)
	}
	a.tokens.Store(&known)
	return nil
}

// identify returns the known token whose hash is token's. It compares with
// every known hash in constant time, without stopping at a match, so the
// time taken says nothing about which hash (or how much of one) matched.
func (a *Authenticator) identify(token string) (knownToken, bool) {
	sum := sha256.Sum256([]byte(token))
	found := -1
	known := *a.tokens.Load()
	for i := range known {
		if subtle.ConstantTimeCompare(sum[:], known[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return knownToken{}, false
	}
	return known[found], true
}

// Admin reports whether authorization (an Authorization header's value)
// carries a known token with the admin role.
func (a *Authenticator) Admin(authorization string) bool {
	tok, ok := a.identify(bearerToken(authorization))
	return ok && tok.role == RoleAdmin
}

// MayDecide reports whether authorization (an Authorization header's
// value, or a gRPC call's authorization metadata) carries a known token,
// and whether that token may ask for decisions (RoleDecide or RoleAdmin):
// what the Envoy rate-limit service asks (envoyrls.Authorizer).
func (a *Authenticator) MayDecide(authorization string) (known, decide bool) {
	tok, ok := a.identify(bearerToken(authorization))
	return ok, ok && (tok.role == RoleDecide || tok.role == RoleAdmin)
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header (the scheme is case-insensitive, RFC 9110 §11.1), or "".
func bearerToken(header string) string {
	const scheme = "bearer "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return ""
	}
	return strings.TrimSpace(header[len(scheme):])
}
