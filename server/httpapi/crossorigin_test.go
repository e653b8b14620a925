package httpapi

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/cluster/backup"
)

// leavingService is an FSM-backed fake that can also leave and back up,
// so that POST /v1/leave and GET /v1/backup are routed; it counts the
// leaves it was asked for, and backs up with backup (a one-group backup of
// nothing if nil).
type leavingService struct {
	*fakeService
	leaves atomic.Int64
	backup func(ctx context.Context, w io.Writer) (backup.Header, error)
}

var (
	_ Leaver   = (*leavingService)(nil)
	_ Backuper = (*leavingService)(nil)
)

func (l *leavingService) Backup(ctx context.Context, w io.Writer) (backup.Header, error) {
	if l.backup != nil {
		return l.backup(ctx, w)
	}
	h := backup.Header{Groups: 1}
	bw, err := backup.NewWriter(w, h)
	for _, name := range backup.Names(1) {
		if err != nil {
			return h, err
		}
		var sw *backup.SectionWriter
		if sw, err = bw.Section(name); err == nil {
			err = sw.Close()
		}
	}
	if err != nil {
		return h, err
	}
	return h, bw.Close()
}

func (l *leavingService) Leave(ctx context.Context) error {
	l.leaves.Add(1)
	return nil
}

func newLeavingService(t *testing.T) *leavingService {
	t.Helper()
	svc, _ := newFSMService(t)
	return &leavingService{fakeService: svc}
}

// TestCrossSiteFormPostCannotLeave is issue 10's finding: a page on another
// site submitting a form to a node's API (no credentials needed) made the
// node leave its cluster and exit. A browser sends such a form as
// application/x-www-form-urlencoded with the page's Origin and
// Sec-Fetch-Site: cross-site.
func TestCrossSiteFormPostCannotLeave(t *testing.T) {
	svc := newLeavingService(t)
	ts := newTestServer(t, svc, Options{})
	a := ts.send(t, "POST", "/v1/leave", "x=1",
		"Content-Type", "application/x-www-form-urlencoded",
		"Origin", "https://evil.example",
		"Sec-Fetch-Site", "cross-site")
	assert.Equal(t, http.StatusForbidden, a.status, "%s", a.body)
	assert.Equal(t, api.CodeCrossOrigin, errorOf(t, a).Code)
	assert.Zero(t, svc.leaves.Load(), "a cross-site form post must not make the node leave")
}

// Every mutating route refuses browser cross-origin requests and the
// content types a browser may send cross-origin without a preflight, body
// or no body; non-browser callers (no Origin, no Sec-Fetch-Site) and
// same-origin browser requests with JSON still pass.
func TestMutatingRoutesRefuseBrowserForms(t *testing.T) {
	svc := newLeavingService(t)
	ts := newTestServer(t, svc, Options{})
	mutating := []struct{ method, path, body string }{
		{"POST", "/v1/allow", `{"client":"a"}`},
		{"POST", "/v1/allow/batch", `{"requests":[{"client":"a"}]}`},
		{"PUT", "/v1/clients/a/tier", `{"tier":"free"}`},
		{"DELETE", "/v1/clients/a/tier", ""},
		{"PUT", "/v1/tiers/free", `{"capacity":5,"refill_per_second":1}`},
		{"DELETE", "/v1/tiers/free", ""},
		{"PUT", "/v1/default", `{"capacity":5,"refill_per_second":1}`},
		{"POST", "/v1/leave", ""},
	}
	refusals := []struct {
		name   string
		hdr    []string
		status int
		code   api.Code
	}{
		{"cross-site fetch", []string{"Sec-Fetch-Site", "cross-site"}, 403, api.CodeCrossOrigin},
		{"same-site fetch", []string{"Sec-Fetch-Site", "same-site"}, 403, api.CodeCrossOrigin},
		{"foreign Origin, old browser", []string{"Origin", "https://evil.example"}, 403, api.CodeCrossOrigin},
		{"null Origin", []string{"Origin", "null"}, 403, api.CodeCrossOrigin},
		{"form", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, api.CodeUnsupportedMediaType},
		{"multipart form", []string{"Content-Type", "multipart/form-data; boundary=x"}, 415, api.CodeUnsupportedMediaType},
		{"text/plain", []string{"Content-Type", "text/plain"}, 415, api.CodeUnsupportedMediaType},
	}
	for _, rt := range mutating {
		for _, rf := range refusals {
			calls := svc.calls.Load()
			a := ts.send(t, rt.method, rt.path, rt.body, rf.hdr...)
			assert.Equal(t, rf.status, a.status, "%s %s, %s: %s", rt.method, rt.path, rf.name, a.body)
			if a.status >= 400 {
				assert.Equal(t, rf.code, errorOf(t, a).Code, "%s %s, %s", rt.method, rt.path, rf.name)
			}
			assert.Equal(t, calls, svc.calls.Load(), "%s %s, %s reached the service", rt.method, rt.path, rf.name)
		}
	}
	require.Zero(t, svc.leaves.Load())

	// What passes: a caller that is not a browser, and a browser on the
	// node's own origin (or a user typing the URL: Sec-Fetch-Site none).
	passes := [][]string{
		nil,
		{"Sec-Fetch-Site", "same-origin", "Origin", ts.URL},
		{"Sec-Fetch-Site", "none"},
		{"Origin", ts.URL},
	}
	for _, hdr := range passes {
		a := ts.send(t, "POST", "/v1/allow", `{"client":"a"}`, hdr...)
		assert.Equal(t, http.StatusOK, a.status, "%v: %s", hdr, a.body)
	}
	a := ts.send(t, "POST", "/v1/leave", "")
	assert.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(t, int64(1), svc.leaves.Load())

	// Reads are not refused for their origin: a browser cannot read the
	// answer cross-origin anyway (no CORS headers), and they change nothing.
	a = ts.send(t, "GET", "/v1/tiers", "", "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")
	assert.Equal(t, http.StatusOK, a.status, "%s", a.body)
}

// The guard refuses before the handler looks at the path, the deadline or
// the body.
func TestGuardComesFirst(t *testing.T) {
	svc := newLeavingService(t)
	ts := newTestServer(t, svc, Options{})
	bad := []string{api.HeaderTimeout, "soon", "Content-Type", "text/plain"}
	for _, tt := range []struct{ method, path, body string }{
		{"PUT", "/v1/clients/a%00b/tier", `{"tier":5}`},
		{"DELETE", "/v1/tiers/Free", ""},
		{"POST", "/v1/allow?status=1", `{}`},
		{"POST", "/v1/leave", `{}`},
	} {
		a := ts.send(t, tt.method, tt.path, tt.body, bad...)
		assert.Equal(t, http.StatusUnsupportedMediaType, a.status, "%s %s: %s", tt.method, tt.path, a.body)
		a = ts.send(t, tt.method, tt.path, tt.body, append(bad, "Sec-Fetch-Site", "cross-site")...)
		assert.Equal(t, api.CodeCrossOrigin, errorOf(t, a).Code, "%s %s", tt.method, tt.path)
	}
	assert.Zero(t, svc.calls.Load())
}
