package peerrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/quorate/quorate/cluster/errs"
)

const streamType = "application/octet-stream"

// HandleStream serves POST path for answers too large to hold in memory:
// fn checks the request and returns what writes the answer, or an error,
// which the caller gets as from Handle. Once writing has begun an error can
// no longer be told apart from data, so the connection is cut instead: the
// caller's read then fails rather than ending early.
func HandleStream[In any](mux *http.ServeMux, path string, fn func(context.Context, In) (func(io.Writer) error, error)) {
	handle(mux, path, func(ctx context.Context, req In, w http.ResponseWriter) {
		write, err := fn(ctx, req)
		if err != nil {
			writeRPCResult(w, struct{}{}, err)
			return
		}
		w.Header().Set("Content-Type", streamType)
		if err := write(w); err != nil {
			panic(http.ErrAbortHandler)
		}
	})
}

// Stream posts in to path on the node at addr, for handlers served by
// HandleStream, and returns the answer's body for the caller to read and
// close. A failure before the answer began is classified as Post's; a read
// that fails later means the answer is incomplete.
func Stream(ctx context.Context, c *Client, addr, path string, in any) (io.ReadCloser, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, addr, path, "application/json", body)
	if err != nil {
		if errors.Is(err, errs.ErrNotLeader) {
			return nil, err
		}
		// A read: whatever happened, nothing was changed.
		return nil, fmt.Errorf("%w: %s%s: %v", errs.ErrUnavailable, addr, path, err)
	}
	if resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == streamType {
		return resp.Body, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s%s: HTTP %d: %s", errs.ErrUnavailable, addr, path, resp.StatusCode, bytes.TrimSpace(data))
	}
	var out Resp[struct{}]
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%w: %s%s: reading the answer: %v", errs.ErrUnavailable, addr, path, err)
	}
	if out.Error == nil {
		return nil, fmt.Errorf("%w: %s%s: an answer without data or an error", errs.ErrUnavailable, addr, path)
	}
	return nil, out.Error.Err()
}
