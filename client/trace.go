package client

import (
	"context"

	"github.com/quorate/quorate/api"
)

// Trace observes the attempts of the calls made with a context it is
// attached to (WithTrace), the way net/http/httptrace observes a request:
// for tests, debugging and the fault suite, which records every attempt.
type Trace struct {
	// Attempt is called as an attempt at node starts, from the calling
	// goroutine; the function it returns (nil for none) is called with the
	// attempt's result when it ends.
	Attempt func(node string, req api.AllowRequest) func(AttemptResult)
}

// AttemptResult is how one attempt ended: with Response, or with Err.
type AttemptResult struct {
	Response api.AllowResponse
	Err      *Error
}

type traceKey struct{}

// WithTrace returns ctx with t attached.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

func traceStart(ctx context.Context, node string, req api.AllowRequest) func(AttemptResult) {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	if t == nil || t.Attempt == nil {
		return nil
	}
	return t.Attempt(node, req)
}
