package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/cluster/backup"
)

// Backuper is implemented by services that can write a backup of their
// whole cluster; GET /v1/backup exists only for them.
type Backuper interface {
	Backup(ctx context.Context, w io.Writer) (backup.Header, error)
}

// backupBuffer is how much of a backup is held before the answer starts:
// a failure within it (typically at the first group) is still answered
// with an error status and code.
const backupBuffer = 256 << 10

// getBackup answers GET /v1/backup with a backup of the whole cluster,
// streamed as it is read from each group's leader. It has no deadline of
// its own (a large cluster takes a while): it ends when the caller goes
// away. A failure after the answer began cannot change its status: the
// trailer api.HeaderBackupError says what happened, and the body is an
// incomplete backup that every reader refuses.
func (s *Server) getBackup(b Backuper) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if len(r.URL.Query()) > 0 {
			return badRequest(api.CodeInvalidQuery, "GET /v1/backup takes no query parameters")
		}
		// The server's write timeout is sized for decisions, not for
		// streaming every group.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		out := &startingWriter{w: w, start: func(h http.Header) {
			h.Set("Content-Type", api.ContentTypeBackup)
			h.Set("Cache-Control", "no-store")
			h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="quorate-%s.qbak"`, time.Now().UTC().Format("20060102T150405Z")))
			h.Set("Trailer", api.HeaderBackupError)
		}}
		bw := bufio.NewWriterSize(out, backupBuffer)
		_, err := b.Backup(r.Context(), bw)
		if err == nil {
			err = bw.Flush()
		}
		if err == nil {
			return nil
		}
		if !out.started {
			return err
		}
		s.log.WarnContext(r.Context(), "httpapi: backup stopped part-way", slog.Any("err", err))
		w.Header().Set(api.HeaderBackupError, err.Error())
		return nil
	}
}

// startingWriter calls start with the answer's headers before its first
// byte.
type startingWriter struct {
	w       http.ResponseWriter
	start   func(http.Header)
	started bool
}

func (s *startingWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.started = true
		s.start(s.w.Header())
		s.w.WriteHeader(http.StatusOK)
	}
	return s.w.Write(p)
}
