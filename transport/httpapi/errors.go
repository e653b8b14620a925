package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
)

// Error codes: the stable, machine-readable part of an error answer.
const (
	// 400: bad input. Nothing reached the cluster.
	CodeInvalidJSON      = "invalid_json"       // malformed JSON, not an object, trailing data, empty body
	CodeUnknownField     = "unknown_field"      // a member the endpoint does not know (names match case-sensitively)
	CodeDuplicateField   = "duplicate_field"    // a member given twice
	CodeInvalidClient    = "invalid_client"     // client missing, empty, too long, not UTF-8, control characters
	CodeInvalidCost      = "invalid_cost"       // cost negative, fractional, too large, not a number
	CodeInvalidRequestID = "invalid_request_id" // request_id too long, not UTF-8, control characters
	CodeInvalidPolicy    = "invalid_policy"     // capacity or refill_per_second missing or out of range
	CodeInvalidTierName  = "invalid_tier_name"  // tier name refused by bucket.ValidateTierName
	CodeInvalidTimeout   = "invalid_timeout"    // X-Quorate-Timeout-Ms not a positive integer
	CodeInvalidQuery     = "invalid_query"      // a query parameter with a value the endpoint refuses
	CodeEmptyBatch       = "empty_batch"        // a batch without requests
	CodeBatchTooLarge    = "batch_too_large"    // more requests than Options.MaxBatch

	CodeTierNotFound         = "tier_not_found"         // 404: deleting a tier that does not exist
	CodeTooManyTiers         = "too_many_tiers"         // 409: creating a tier past bucket.MaxTiers
	CodeNotFound             = "not_found"              // 404: no such route
	CodeMethodNotAllowed     = "method_not_allowed"     // 405: route exists, method does not
	CodeBodyTooLarge         = "body_too_large"         // 413: body over the endpoint's limit
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: Content-Type not application/json

	// 503: the cluster could not answer; Retry-After says when to try again.
	CodeUnavailable  = "unavailable"      // the group has no leader or no quorum; nothing was decided
	CodeUnknown      = "outcome_unknown"  // the request may have been decided; retry with the same request_id to learn
	CodeShuttingDown = "shutting_down"    // this node is stopping: try another
	CodeOverloaded   = "overloaded"       // the node has more work queued than it takes; nothing was decided
	CodeTooMany      = "too_many_clients" // a new client past the node's --max-clients; known clients are served
	CodeDiskFull     = "disk_full"        // the node's data dir is nearly full; nothing was decided
	CodeTimeout      = "timeout"          // the deadline passed before the answer was applied
	CodeNotReady     = "not_ready"        // GET /readyz: some group has no leader

	CodeInternal = "internal" // 500: a bug or an unexpected failure, logged on the node
)

// statusClientClosedRequest is recorded (not sent: nobody is listening) when
// the caller went away before the answer. It is nginx's convention.
const statusClientClosedRequest = 499

// apiError is an error answer ready to be written.
type apiError struct {
	status int
	code   string
	msg    string
	// retryAfter, when > 0, is sent as Retry-After in seconds.
	retryAfter int
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, msg: fmt.Sprintf(format, args...)}
}

// unavailable are the cluster's errors that answer 503, in the order they
// are matched: what each tells the caller, and how long to wait before
// retrying. Only outcome_unknown means "maybe decided", and it comes first:
// an unknown outcome wraps whatever ended the attempts to learn it (the
// node shutting down, say), and every other answer here tells the caller
// that nothing was decided.
var unavailable = []struct {
	err        error
	code, msg  string
	retryAfter int
}{
	{cluster.ErrOutcomeUnknown, CodeUnknown, "the request may or may not have been decided (its answer was lost in a failover); retry with the same request_id to learn which", 1},
	{cluster.ErrShuttingDown, CodeShuttingDown, "this node is shutting down; retry on another node", 1},
	{cluster.ErrOverloaded, CodeOverloaded, "this node has more work queued than it takes; nothing was decided, retry later or on another node", 1},
	{cluster.ErrTooManyClients, CodeTooMany, "this node holds the most clients it may (--max-clients) and this client is new; nothing was decided", 1},
	{cluster.ErrDiskFull, CodeDiskFull, "this node's disk is nearly full; nothing was decided, retry on another node", 5},
	{cluster.ErrUnavailable, CodeUnavailable, "the cluster cannot decide right now (no leader or no quorum); nothing was decided, retry with the same request_id", 1},
}

// mapError turns an error from the Service (or a handler) into the answer
// to send. It is the only place errors become status codes; it logs what it
// cannot classify and hides its text from the caller.
func (s *Server) mapError(r *http.Request, err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	for _, u := range unavailable {
		if errors.Is(err, u.err) {
			return &apiError{status: http.StatusServiceUnavailable, code: u.code, msg: u.msg, retryAfter: u.retryAfter}
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusServiceUnavailable, code: CodeTimeout,
			msg: "no answer before the deadline; retry with the same request_id", retryAfter: 1}
	case errors.Is(err, context.Canceled):
		if r.Context().Err() != nil {
			return &apiError{status: statusClientClosedRequest, code: CodeUnavailable, msg: "request canceled by the caller"}
		}
		return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable,
			msg: "the request was canceled inside the node; retry with the same request_id", retryAfter: 1}
	case errors.Is(err, fsm.ErrNoSuchTier):
		return &apiError{status: http.StatusNotFound, code: CodeTierNotFound, msg: err.Error()}
	case errors.Is(err, bucket.ErrTooManyTiers):
		return &apiError{status: http.StatusConflict, code: CodeTooManyTiers, msg: err.Error()}
	case errors.Is(err, bucket.ErrInvalidTierName):
		return badRequest(CodeInvalidTierName, "%s", err.Error())
	case errors.Is(err, bucket.ErrInvalidPolicy):
		return badRequest(CodeInvalidPolicy, "%s", err.Error())
	}
	s.log.ErrorContext(r.Context(), "httpapi: internal error", slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.Any("err", err))
	return &apiError{status: http.StatusInternalServerError, code: CodeInternal, msg: "internal error; see the node's log"}
}
