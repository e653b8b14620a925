package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/cluster"
)

func TestRoutesAnswer(t *testing.T) {
	svc := &fakeService{routes: cluster.Routes{Groups: 4, Version: 17, Leaders: map[int]string{0: "10.0.0.1:7070", 3: "10.0.0.2:7070"}}}
	for scheme, want := range map[string]string{"": "http://10.0.0.1:7070", "https": "https://10.0.0.1:7070"} {
		ts := newTestServer(t, svc, Options{Scheme: scheme})
		a := ts.send(t, "GET", "/v1/routes", "")
		require.Equal(t, http.StatusOK, a.status, a.body)
		var got api.RoutesResponse
		require.NoError(t, json.Unmarshal([]byte(a.body), &got))
		assert.Equal(t, 4, got.Groups)
		assert.Equal(t, "fnv1a64-mod", got.Hash)
		assert.Equal(t, uint64(17), got.Version)
		assert.Equal(t, want, got.Leaders["0"])
		assert.Len(t, got.Leaders, 2, "groups without a known leader are absent")
		assert.Zero(t, svc.calls.Load(), "answered from the node's own view, without calling into the cluster")
	}
}
