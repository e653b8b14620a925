package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/cluster/backup"
)

// A backup streams with its media type and an empty trailer; one that
// fails before its first bytes left is an error answer with a code; one
// that fails part-way says so in the trailer, and the Go client fails.
func TestBackupStreamsAndReportsFailures(t *testing.T) {
	svc := newLeavingService(t)
	ts := newTestServer(t, svc, Options{})
	node := client.NewNode(ts.URL, ts.Client())

	var buf bytes.Buffer
	require.NoError(t, node.Backup(t.Context(), &buf))
	h, err := backup.Read(bytes.NewReader(buf.Bytes()), nil)
	require.NoError(t, err, "the body is a whole backup")
	assert.Equal(t, 1, h.Groups)
	a := ts.send(t, "GET", "/v1/backup", "")
	assert.Equal(t, 200, a.status)
	assert.Equal(t, api.ContentTypeBackup, a.header.Get("Content-Type"))
	assert.Contains(t, a.header.Get("Content-Disposition"), ".qbak")

	svc.backup = func(context.Context, io.Writer) (backup.Header, error) {
		return backup.Header{}, cluster.ErrUnavailable
	}
	a = ts.send(t, "GET", "/v1/backup", "")
	assert.Equal(t, 503, a.status)
	assert.Equal(t, api.CodeUnavailable, errorOf(t, a).Code)
	var e *client.Error
	require.ErrorAs(t, node.Backup(t.Context(), io.Discard), &e)
	assert.Equal(t, 503, e.Status)

	svc.backup = func(_ context.Context, w io.Writer) (backup.Header, error) {
		_, err := w.Write(make([]byte, 3*backupBuffer)) // the answer has begun
		return backup.Header{}, errors.Join(err, errors.New("group 3: the leader went away"))
	}
	a = ts.send(t, "GET", "/v1/backup", "")
	assert.Equal(t, 200, a.status, "too late for a status")
	err = node.Backup(t.Context(), io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "group 3: the leader went away")

	a = ts.send(t, "GET", "/v1/backup?x=1", "")
	assert.Equal(t, 400, a.status)
}
