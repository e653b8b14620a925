package httpapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/fsm"
)

// A bad since or limit is refused with invalid_query, naming the
// parameter, before the service is asked.
func TestAuditQueryIsValidated(t *testing.T) {
	svc := &fakeService{}
	ts := newTestServer(t, svc, Options{})
	for _, q := range []struct{ query, field string }{
		{"since=-1", "since"}, {"since=abc", "since"}, {"since=1&since=2", "since"}, {"since=18446744073709551616", "since"},
		{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"}, {"limit=5&limit=6", "limit"},
		{"from=3", "from"},
	} {
		a := ts.send(t, "GET", "/v1/audit?"+q.query, "")
		require.Equal(t, 400, a.status, "%s: %s", q.query, a.body)
		e := errorOf(t, a)
		assert.Equal(t, api.CodeInvalidQuery, e.Code, q.query)
		assert.Contains(t, e.Message, q.field, q.query)
	}
	assert.Zero(t, svc.calls.Load(), "bad input reached the service")

	var got []int
	svc.audit = func(_ context.Context, since uint64, limit int) (fsm.AuditPage, error) {
		got = append(got, int(since), limit)
		return fsm.AuditPage{}, nil
	}
	a := ts.send(t, "GET", "/v1/audit", "")
	require.Equal(t, 200, a.status, "%s", a.body)
	assert.JSONEq(t, `{"entries":[],"more":false,"oldest_version":0}`, string(a.body), "an empty trail is an empty list")
	ts.send(t, "GET", "/v1/audit?since=7&limit=1000", "")
	assert.Equal(t, []int{0, 100, 7, 1000}, got, "since 0 and limit 100 when absent")
}

// The actor of a change is the name of the admin token that asked for it,
// and anonymous on a node without tokens.
func TestChangesNameTheirActor(t *testing.T) {
	tokens, auth := roleTokens(t)
	for _, c := range []struct {
		opts  Options
		token string
		want  string
	}{{Options{Auth: auth}, tokens[RoleAdmin], "t-admin"}, {Options{}, "", fsm.Anonymous}} {
		svc := &fakeService{
			setClientTier: func(context.Context, string, string) error { return nil },
			resetClient:   func(context.Context, string) (bool, error) { return true, nil },
			changeConfig: func(context.Context, fsm.ConfigOp) (api.ConfigChange, error) {
				return api.ConfigChange{Version: 2}, nil
			},
		}
		ts := newTestServer(t, svc, c.opts)
		for _, r := range []struct{ method, path, body string }{
			{"PUT", "/v1/clients/a/tier", `{"tier":"pro"}`},
			{"DELETE", "/v1/clients/a/tier", ""},
			{"POST", "/v1/clients/a/reset", ""},
			{"PUT", "/v1/tiers/pro", `{"capacity":5,"refill_per_second":1}`},
			{"DELETE", "/v1/tiers/pro", ""},
			{"PUT", "/v1/default", `{"capacity":5,"refill_per_second":1}`},
		} {
			svc.actor.Store(nil)
			a := ts.send(t, r.method, r.path, r.body, "Authorization", "Bearer "+c.token)
			require.Less(t, a.status, 300, "%s %s: %s", r.method, r.path, a.body)
			assert.Equal(t, c.want, svc.lastActor(), "%s %s", r.method, r.path)
		}
	}
}
