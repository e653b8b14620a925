package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/quorate/quorate/api"
)

// Error is a failed call: an error answer from a node, or a call that got
// no answer. Kind says what a caller may do with it.
type Error struct {
	// Status is the HTTP status code, 0 when no answer arrived.
	Status int
	// Code is the answer's stable error code, "" when the answer was not a
	// quorate error body (a proxy's error page) or there was no answer.
	Code api.Code
	// Message is the human-readable message, or the start of a non-JSON body.
	Message string
	// RetryAfter is the answer's Retry-After, 0 if it sent none.
	RetryAfter time.Duration
	// Node is the base URL of the node the call went to.
	Node string
	// Err is the transport's error for a call that got no answer.
	Err error

	kind api.Kind
}

// Kind is what the caller may do after e:
//
//   - api.Refused: nothing was decided and the same request would be
//     refused again (bad input, a token without the role).
//   - api.RetrySafe: nothing was decided; the request may go anywhere again.
//   - api.Unknown: the request may have been decided; only a retry with the
//     same request id is safe, and returns the first decision if there was one.
func (e *Error) Kind() api.Kind { return e.kind }

func (e *Error) Error() string {
	where := "quorate: "
	if e.Node != "" {
		where += e.Node + ": "
	}
	switch {
	case e.Err != nil:
		return where + e.Err.Error()
	case e.Code == "":
		return fmt.Sprintf("%sHTTP %d: %s", where, e.Status, e.Message)
	}
	return fmt.Sprintf("%sHTTP %d %s: %s", where, e.Status, e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of err: an *Error's own, api.Refused for an
// invalid argument the client refused before sending, and api.Unknown for
// anything else (a cancelled context among them), the kind that never leads
// a caller to spend twice.
func KindOf(err error) api.Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.kind
	}
	return api.Unknown
}

// answerError reads an error answer: its code's kind from api's table, or
// for a body without a code (a proxy's page) the kind its status allows.
func answerError(node string, resp *http.Response, data []byte) *Error {
	e := &Error{Status: resp.StatusCode, Node: node}
	if s, err := strconv.Atoi(resp.Header.Get(api.HeaderRetryAfter)); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	var eb api.ErrorBody
	if err := json.Unmarshal(data, &eb); err == nil && eb.Error.Code != "" {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
		e.kind = api.KindOf(e.Code)
		return e
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e.Message = msg
	e.kind = kindOfStatus(resp.StatusCode)
	return e
}

// kindOfStatus is the kind of an answer without a quorate code: a 4xx from
// something in front of the node refused the request; a 502 or 504 from a
// proxy may have passed it on; anything else is unknown too.
func kindOfStatus(status int) api.Kind {
	if status >= 400 && status < 500 && status != http.StatusRequestTimeout {
		return api.Refused
	}
	return api.Unknown
}

// notSent is a call that provably never reached a node: no connection
// could be made. It is retry_safe.
func notSent(node string, err error) *Error {
	return &Error{Node: node, Err: err, kind: api.RetrySafe}
}

// lost is a call that was sent and got no answer (a broken connection, a
// timeout): it may have been decided.
func lost(node string, err error) *Error {
	return &Error{Node: node, Err: err, kind: api.Unknown}
}

// invalid is an argument the client refuses before sending anything.
func invalid(format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Message: err.Error(), Err: err, kind: api.Refused}
}
