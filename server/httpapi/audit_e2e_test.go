package httpapi_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/cluster/clustertest"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/server/httpapi"
)

// The audit trail over HTTP on a real node with tokens: every change names
// the token that made it, the leader's time, and the policy before and
// after; a client's last assignment and reset outlive its bucket and a
// restart; the trail pages by version; and only tokens that may read see
// it.
func TestAuditOverHTTP(t *testing.T) {
	clock := newManualClock()
	dir := t.TempDir()
	tokens := map[string]string{"ops": httpapi.NewToken(), "auditor": httpapi.NewToken(), "web": httpapi.NewToken()}
	file := httpapi.AuthFile{Tokens: []httpapi.TokenEntry{
		{Name: "ops", Role: httpapi.RoleAdmin, SHA256: httpapi.HashToken(tokens["ops"])},
		{Name: "auditor", Role: httpapi.RoleRead, SHA256: httpapi.HashToken(tokens["auditor"])},
		{Name: "web", Role: httpapi.RoleDecide, SHA256: httpapi.HashToken(tokens["web"])},
	}}
	start := func() (*cluster.Node, map[string]*client.Node) {
		auth, err := httpapi.NewAuthenticator(file)
		require.NoError(t, err)
		reg := prometheus.NewRegistry()
		node := clustertest.StartNode(t, cluster.Options{DataDir: dir, Clock: clock, Registerer: reg, ReclaimInterval: 10 * time.Millisecond})
		srv := httptest.NewServer(httpapi.New(node, httpapi.Options{Registerer: reg, Gatherer: reg, Auth: auth}))
		t.Cleanup(srv.Close)
		as := map[string]*client.Node{}
		for name, tok := range tokens {
			as[name] = client.NewNode(srv.URL, srv.Client(), client.WithToken(tok))
		}
		require.Eventually(t, func() bool { return node.ClusterVersion() >= fsm.ClusterVersionAudit }, 10*time.Second, 5*time.Millisecond)
		return node, as
	}
	ctx := t.Context()
	node, as := start()
	ops, auditor := as["ops"], as["auditor"]
	at := clock.Now().UnixNano()

	small, big := bucket.Policy{Capacity: 3, Rate: bucket.Scale}, bucket.Policy{Capacity: 5, Rate: bucket.Scale}
	first, err := ops.PutTier(ctx, "free", small, bucket.Keep)
	require.NoError(t, err)
	_, err = ops.PutTier(ctx, "free", big, bucket.Fill)
	require.NoError(t, err)
	_, err = ops.PutDefault(ctx, bucket.Policy{Capacity: 7, Rate: 0}, bucket.Keep)
	require.NoError(t, err)
	last, err := ops.DeleteTier(ctx, "gone")
	require.Error(t, err, "a refused change is not in the trail")
	_, err = ops.PutTier(ctx, "gone", small, bucket.Keep)
	require.NoError(t, err)
	last, err = ops.DeleteTier(ctx, "gone")
	require.NoError(t, err)

	page, err := auditor.Audit(ctx, first.Version-1, 0)
	require.NoError(t, err)
	smallJSON, bigJSON := api.PolicyToJSON(small), api.PolicyToJSON(big)
	want := []api.AuditEntry{
		{Version: first.Version, TimeUnixNano: at, Actor: "ops", Op: api.AuditTierSet, Tier: "free", After: &smallJSON, OnRaise: "keep"},
		{Version: first.Version + 1, TimeUnixNano: at, Actor: "ops", Op: api.AuditTierSet, Tier: "free", Before: &smallJSON, After: &bigJSON, OnRaise: "fill"},
		{Version: first.Version + 2, TimeUnixNano: at, Actor: "ops", Op: api.AuditDefaultSet, Tier: "default",
			Before: new(api.PolicyToJSON(bucket.BuiltinDefault)), After: new(api.PolicyToJSON(bucket.Policy{Capacity: 7})), OnRaise: "keep"},
		{Version: first.Version + 3, TimeUnixNano: at, Actor: "ops", Op: api.AuditTierSet, Tier: "gone", After: &smallJSON, OnRaise: "keep"},
		{Version: last.Version, TimeUnixNano: at, Actor: "ops", Op: api.AuditTierDelete, Tier: "gone", Before: &smallJSON},
	}
	assert.Equal(t, api.AuditResponse{Entries: want, OldestVersion: first.Version}, page)

	two, err := auditor.Audit(ctx, first.Version, 2)
	require.NoError(t, err)
	assert.Equal(t, api.AuditResponse{Entries: want[1:3], More: true, OldestVersion: first.Version}, two, "a page after a version")
	_, err = ops.Audit(ctx, 0, 1001)
	assert.Equal(t, api.CodeInvalidQuery, codeOf(t, err), "a limit above 1000")
	_, err = as["web"].Audit(ctx, 0, 0)
	assert.Equal(t, api.CodeForbidden, codeOf(t, err), "a decide token may not read the trail")

	// A client's record: assigned and reset by ops, then its bucket is
	// reclaimed and the node restarted; the record is still there.
	require.NoError(t, ops.SetClientTier(ctx, "alice", "free"))
	_, err = as["web"].Allow(ctx, "alice", 1, "")
	require.NoError(t, err)
	clock.Advance(time.Second)
	_, err = ops.ResetClient(ctx, "alice")
	require.NoError(t, err)
	_, err = as["web"].Allow(ctx, "alice", 1, "")
	require.NoError(t, err)
	clock.Advance(time.Hour) // full again, so reclaimed
	require.Eventually(t, func() bool {
		v, err := auditor.GetClient(ctx, "alice")
		return err == nil && !v.Known
	}, 10*time.Second, 10*time.Millisecond, "the full bucket is reclaimed")
	require.NoError(t, node.Close())

	_, as = start()
	v, err := as["auditor"].GetClient(ctx, "alice")
	require.NoError(t, err)
	assert.False(t, v.Known)
	assert.Equal(t, &api.Assignment{Act: api.Act{TimeUnixNano: at, Actor: "ops"}, Tier: "free"}, v.LastAssigned)
	assert.Equal(t, &api.Act{TimeUnixNano: at + int64(time.Second), Actor: "ops"}, v.LastReset)
	page, err = as["auditor"].Audit(ctx, first.Version-1, 0)
	require.NoError(t, err)
	assert.Equal(t, want, page.Entries, "the trail survives a restart")
	never, err := as["auditor"].GetClient(ctx, "bob")
	require.NoError(t, err)
	assert.Nil(t, never.LastAssigned, "a client nobody acted on has no record")
	assert.Nil(t, never.LastReset)
}

// codeOf is the code of err, a *client.Error.
func codeOf(t *testing.T, err error) api.Code {
	t.Helper()
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	return ae.Code
}
