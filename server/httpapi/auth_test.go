package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"

	"github.com/quorate/quorate/client"
)

// roleTokens makes one token per role and an Authenticator knowing them.
func roleTokens(t *testing.T) (map[Role]string, *Authenticator) {
	t.Helper()
	tokens := map[Role]string{}
	var f AuthFile
	for _, r := range Roles {
		tokens[r] = NewToken()
		f.Tokens = append(f.Tokens, TokenEntry{Name: "t-" + string(r), Role: r, SHA256: HashToken(tokens[r])})
	}
	a, err := NewAuthenticator(f)
	require.NoError(t, err)
	return tokens, a
}

// wantRoles is DESIGN §7's rule, written independently of routeAccess:
// decide calls the decision routes, read every GET, admin everything;
// /healthz and /readyz need no token (nil).
func wantRoles(pattern string) []Role {
	switch pattern {
	case "GET /healthz", "GET /readyz":
		return nil
	case "POST /v1/allow", "POST /v1/allow/batch":
		return []Role{RoleDecide, RoleAdmin}
	case "GET /v1/clients/{client}", "GET /v1/routes":
		return []Role{RoleDecide, RoleRead, RoleAdmin}
	case "GET /v1/backup":
		return []Role{RoleAdmin}
	}
	if strings.HasPrefix(pattern, "GET ") {
		return []Role{RoleRead, RoleAdmin}
	}
	return []Role{RoleAdmin}
}

// concrete turns a route pattern into a request line that matches it.
func concrete(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	path = strings.NewReplacer("{client}", "alice", "{tier}", "free").Replace(path)
	return method, path
}

// TestEveryRouteHasItsRoles walks every route the Server registered, over
// real HTTP on loopback, with no token, an unknown one, and one of each
// role: 401 with WWW-Authenticate, 403 forbidden, or through to the
// handler (any other status) exactly as DESIGN §7 says.
func TestEveryRouteHasItsRoles(t *testing.T) {
	tokens, auth := roleTokens(t)
	svc := newLeavingService(t)
	ts := newTestServer(t, svc, Options{Auth: auth})
	require.Contains(t, ts.api.patterns, "POST /v1/leave", "the fake leaves, so the route is registered")
	require.Contains(t, ts.api.patterns, "GET /metrics")
	require.Contains(t, ts.api.patterns, "GET /v1/backup", "the fake backs up, so the route is registered")

	for _, pattern := range ts.api.patterns {
		method, path := concrete(pattern)
		body := ""
		if method != "GET" {
			body = "{}"
		}
		want := wantRoles(pattern)
		for _, bearer := range []string{"", "Bearer nope", "Basic " + tokens[RoleAdmin]} {
			a := ts.send(t, method, path, body, "Authorization", bearer)
			if want == nil {
				assert.NotContains(t, []int{401, 403}, a.status, "%s is open: %s", pattern, a.body)
				continue
			}
			assert.Equal(t, http.StatusUnauthorized, a.status, "%s with %q: %s", pattern, bearer, a.body)
			assert.Equal(t, api.CodeUnauthenticated, errorOf(t, a).Code, pattern)
			assert.Equal(t, `Bearer realm="quorate"`, a.header.Get("WWW-Authenticate"), pattern)
		}
		for _, role := range Roles {
			a := ts.send(t, method, path, body, "Authorization", "Bearer "+tokens[role])
			if want == nil || contains(want, role) {
				assert.NotContains(t, []int{401, 403}, a.status, "%s as %s: %s", pattern, role, a.body)
				continue
			}
			assert.Equal(t, http.StatusForbidden, a.status, "%s as %s: %s", pattern, role, a.body)
			e := errorOf(t, a)
			assert.Equal(t, api.CodeForbidden, e.Code, pattern)
			assert.Contains(t, e.Message, fmt.Sprintf("role %s", role))
		}
	}
	assert.Equal(t, int64(1), svc.leaves.Load(), "only the admin's leave got through")

	// Unknown routes and methods answer 404/405 only to known tokens.
	for _, rl := range [][2]string{{"GET", "/v2/nope"}, {"GET", "/v1/leave"}} {
		a := ts.send(t, rl[0], rl[1], "")
		assert.Equal(t, http.StatusUnauthorized, a.status, "%v", rl)
		a = ts.send(t, rl[0], rl[1], "", "Authorization", "Bearer "+tokens[RoleDecide])
		assert.Contains(t, []int{404, 405}, a.status, "%v", rl)
	}

	// Refusals are counted by code, on /metrics (which a read token may see).
	a := ts.send(t, "GET", "/metrics", "", "Authorization", "Bearer "+tokens[RoleRead])
	require.Equal(t, http.StatusOK, a.status)
	assert.Contains(t, string(a.body), `quorate_http_refused_total{code="unauthenticated"}`)
	assert.Contains(t, string(a.body), `quorate_http_refused_total{code="forbidden"}`)
	assert.Contains(t, string(a.body), `quorate_http_requests_total{code="401",route="POST /v1/allow"} 3`)
}

func contains(roles []Role, r Role) bool {
	for _, x := range roles {
		if x == r {
			return true
		}
	}
	return false
}

// Tokens are compared by hash; a reload (Replace) drops old tokens at once.
func TestAuthenticatorReplace(t *testing.T) {
	old, fresh := NewToken(), NewToken()
	a, err := NewAuthenticator(AuthFile{Tokens: []TokenEntry{{Name: "old", Role: RoleRead, SHA256: HashToken(old)}}})
	require.NoError(t, err)
	ts := newTestServer(t, newLeavingService(t), Options{Auth: a})
	get := func(tok string) int { return ts.send(t, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok).status }
	assert.Equal(t, 200, get(old))
	assert.Equal(t, 401, get(fresh))

	require.NoError(t, a.Replace(AuthFile{Tokens: []TokenEntry{{Name: "new", Role: RoleRead, SHA256: strings.ToUpper(HashToken(fresh))}}}))
	assert.Equal(t, 401, get(old))
	assert.Equal(t, 200, get(fresh))

	require.Error(t, a.Replace(AuthFile{}), "no tokens")
	require.Error(t, a.Replace(AuthFile{Tokens: []TokenEntry{{Name: "x", Role: "root", SHA256: HashToken(old)}}}))
	assert.Equal(t, 200, get(fresh), "a refused replacement keeps the tokens")
}

func TestParseAuthFile(t *testing.T) {
	h := HashToken("x")
	for _, tt := range []struct {
		name, data, err string
	}{
		{"ok", `{"tokens":[{"name":"web","role":"decide","sha256":"` + h + `"},{"name":"ops","role":"admin","sha256":"` + HashToken("y") + `"}]}`, ""},
		{"no tokens", `{"tokens":[]}`, "no tokens"},
		{"empty object", `{}`, "no tokens"},
		{"not json", `tokens`, "not an auth file"},
		{"unknown field", `{"tokens":[{"name":"web","role":"decide","sha256":"` + h + `","token":"x"}]}`, "unknown field"},
		{"trailing", `{"tokens":[{"name":"web","role":"decide","sha256":"` + h + `"}]} {}`, "after the JSON object"},
		{"role", `{"tokens":[{"name":"web","role":"root","sha256":"` + h + `"}]}`, "role must be one of"},
		{"short hash", `{"tokens":[{"name":"web","role":"read","sha256":"abc"}]}`, "64 hex digits"},
		{"plain token", `{"tokens":[{"name":"web","role":"read","sha256":"qrt_abc"}]}`, "64 hex digits"},
		{"no name", `{"tokens":[{"role":"read","sha256":"` + h + `"}]}`, "token name"},
		{"space in name", `{"tokens":[{"name":"a b","role":"read","sha256":"` + h + `"}]}`, "without spaces"},
		{"same name", `{"tokens":[{"name":"a","role":"read","sha256":"` + h + `"},{"name":"a","role":"read","sha256":"` + HashToken("y") + `"}]}`, "more than once"},
		{"same hash", `{"tokens":[{"name":"a","role":"read","sha256":"` + h + `"},{"name":"b","role":"admin","sha256":"` + strings.ToUpper(h) + `"}]}`, "more than once"},
	} {
		_, err := ParseAuthFile([]byte(tt.data))
		if tt.err == "" {
			assert.NoError(t, err, tt.name)
			continue
		}
		if assert.Error(t, err, tt.name) {
			assert.Contains(t, err.Error(), tt.err, tt.name)
		}
	}
}

func TestBearerToken(t *testing.T) {
	for _, tt := range []struct{ header, want string }{
		{"Bearer abc", "abc"},
		{"bearer abc", "abc"},
		{"BEARER  abc ", "abc"},
		{"Bearer", ""},
		{"Bearer ", ""},
		{"Basic abc", ""},
		{"Bearerabc", ""},
		{"", ""},
	} {
		assert.Equal(t, tt.want, bearerToken(tt.header), "bearerToken(%q)", tt.header)
	}
	tok := NewToken()
	assert.True(t, strings.HasPrefix(tok, TokenPrefix))
	assert.Len(t, tok, len(TokenPrefix)+43)
	assert.NotEqual(t, tok, NewToken())
	assert.Len(t, HashToken(tok), 64)
}

// Without tokens a loopback node answers only requests addressed to a
// loopback host: a page that rebinds its own name to 127.0.0.1 sends
// Host: its-name, and is refused even for reads.
func TestLoopbackHostOnly(t *testing.T) {
	ts := newTestServer(t, newLeavingService(t), Options{LoopbackHostOnly: true})
	for _, tt := range []struct {
		host   string
		status int
	}{
		{"127.0.0.1:7070", 200},
		{"127.0.0.5", 200},
		{"localhost:7070", 200},
		{"LOCALHOST", 200},
		{"[::1]:7070", 200},
		{"evil.example:7070", 403},
		{"10.0.0.1:7070", 403},
		{"localhost.evil.example", 403},
	} {
		req, err := http.NewRequest("GET", ts.URL+"/v1/tiers", nil)
		require.NoError(t, err)
		req.Host = tt.host
		a := ts.do(t, req)
		assert.Equal(t, tt.status, a.status, "Host %s: %s", tt.host, a.body)
		if tt.status == 403 {
			assert.Equal(t, api.CodeHostNotAllowed, errorOf(t, a).Code)
		}
	}
	req, err := http.NewRequest("GET", ts.URL+"/healthz", nil)
	require.NoError(t, err)
	req.Host = "evil.example"
	assert.Equal(t, 200, ts.do(t, req).status, "health checks stay open")
}

// The Go client sends its token; without one it gets the 401 as a *client.Error.
func TestClientWithToken(t *testing.T) {
	tokens, auth := roleTokens(t)
	ts := newTestServer(t, newLeavingService(t), Options{Auth: auth})
	ctx := context.Background()

	_, err := client.NewNode(ts.URL, ts.Client()).Tiers(ctx)
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusUnauthorized, ae.Status)
	assert.Equal(t, api.CodeUnauthenticated, ae.Code)

	_, err = client.NewNode(ts.URL, ts.Client(), client.WithToken(tokens[RoleRead])).Tiers(ctx)
	require.NoError(t, err)
	_, err = client.NewNode(ts.URL, ts.Client(), client.WithToken(tokens[RoleRead])).Allow(ctx, "a", 1, "")
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, api.CodeForbidden, ae.Code)
	r, err := client.NewNode(ts.URL, ts.Client(), client.WithToken(tokens[RoleDecide])).Allow(ctx, "a", 1, "")
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	require.NoError(t, client.NewNode(ts.URL, ts.Client(), client.WithToken(tokens[RoleAdmin])).Leave(ctx))
}
