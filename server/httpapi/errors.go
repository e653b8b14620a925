package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
)

// statusClientClosedRequest is recorded (not sent: nobody is listening) when
// the caller went away before the answer. It is nginx's convention.
const statusClientClosedRequest = 499

// apiError is an error answer ready to be written.
type apiError struct {
	status int
	code   api.Code
	msg    string
	// retryAfter, when > 0, is sent as Retry-After in seconds.
	retryAfter int
}

func (e *apiError) Error() string { return string(e.code) + ": " + e.msg }

// newError is the answer for code with msg: its status and Retry-After are
// the api table's (api.Lookup), the one place codes meet statuses.
func newError(code api.Code, msg string) *apiError {
	m, ok := api.Lookup(code)
	if !ok {
		m = api.Meaning{Kind: api.Unknown, Status: http.StatusInternalServerError}
	}
	return &apiError{status: m.Status, code: code, msg: msg, retryAfter: m.RetryAfter}
}

func badRequest(code api.Code, format string, args ...any) *apiError {
	return newError(code, fmt.Sprintf(format, args...))
}

// messages are what the answer to each of the cluster's errors tells
// the caller (cluster.Classify gives the error, and its code the status
// and kind).
var messages = map[api.Code]string{
	api.CodeOutcomeUnknown: "the request may or may not have been decided (its answer was lost in a failover); retry with the same request_id to learn which",
	api.CodeShuttingDown:   "this node is shutting down; retry on another node",
	api.CodeOverloaded:     "this node cannot take more work or state now; nothing was decided, retry later or on another node",
	api.CodeTooManyClients: "this node holds the most clients it may (--max-clients) and this client is new; nothing was decided",
	api.CodeRequestIDsFull: "the client's group remembers the most request ids it may for their window; a request with a new id was not decided (nothing was taken): send it again shortly, or without a request_id",
	api.CodeDiskFull:       "this node's disk is nearly full; nothing was decided, retry on another node",
	api.CodeUnavailable:    "the cluster cannot decide right now (no leader or no quorum); nothing was decided, retry with the same request_id",
	api.CodeClusterVersion: "this needs a cluster version the cluster has not reached (a node still runs an older release); finish the upgrade first",
}

// mapError turns an error from the Service (or a handler) into the answer
// to send. It is the only place errors become status codes; it logs what it
// cannot classify and hides its text from the caller.
func (s *Server) mapError(r *http.Request, err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if e, ok := cluster.Classify(err); ok {
		return newError(e.Code(), messages[e.Code()])
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return newError(api.CodeTimeout, "no answer before the deadline; retry with the same request_id")
	case errors.Is(err, context.Canceled):
		if r.Context().Err() != nil {
			return &apiError{status: statusClientClosedRequest, code: api.CodeUnavailable, msg: "request canceled by the caller"}
		}
		return newError(api.CodeUnavailable, "the request was canceled inside the node; retry with the same request_id")
	case errors.Is(err, fsm.ErrNoSuchTier):
		return newError(api.CodeTierNotFound, err.Error())
	case errors.Is(err, bucket.ErrTooManyTiers):
		return newError(api.CodeTooManyTiers, err.Error())
	case errors.Is(err, bucket.ErrInvalidTierName):
		return badRequest(api.CodeInvalidTierName, "%s", err.Error())
	case errors.Is(err, bucket.ErrInvalidPolicy):
		return badRequest(api.CodeInvalidPolicy, "%s", err.Error())
	}
	s.log.ErrorContext(r.Context(), "httpapi: internal error", slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.Any("err", err))
	return newError(api.CodeInternal, "internal error; see the node's log")
}
