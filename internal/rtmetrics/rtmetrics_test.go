package rtmetrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var sink []byte

func TestFetchReadsWhatTheHandlerServes(t *testing.T) {
	srv := httptest.NewServer(Handler())
	t.Cleanup(srv.Close)

	before, err := Fetch(context.Background(), srv.Client(), srv.URL, "")
	require.NoError(t, err)
	for _, name := range []string{AllocObjects, AllocBytes, GCCPU, UserCPU, GoroutinesMade, SchedLatencies, MutexWaitSeconds} {
		assert.Contains(t, before, name)
	}
	const n = 1000
	for range n {
		sink = make([]byte, 64)
	}
	runtime.GC() // the allocation counters are flushed by a collection
	after, err := Fetch(context.Background(), srv.Client(), srv.URL, "")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after[AllocObjects]-before[AllocObjects], float64(n), "the 1,000 allocations are counted")
}

func TestTheHandlerAnswersOnlyGET(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

func TestFetchSendsTheToken(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	_, err := Fetch(context.Background(), srv.Client(), srv.URL, "s3cret")
	require.NoError(t, err)
	assert.Equal(t, "Bearer s3cret", got)
}
