package client

import (
	"log/slog"
	"net/http"
	"strconv"
)

// KeyFunc names the client a request is charged to, and its cost (1 for
// an ordinary request). An empty id lets the request through unlimited:
// health checks, say.
type KeyFunc func(r *http.Request) (id string, cost int64)

// Middleware returns a wrapper that asks c before every request. An allowed
// request passes to the wrapped handler with the RateLimit fields set on the
// answer; a denied one is answered 429 Too Many Requests with Retry-After
// and the same fields, and never reaches the handler. While the cluster
// cannot decide, c's Config.OnUnavailable decides. A request the cluster
// refuses (an id too long for it, a token without the decide role) is
// answered 500, since it is the service's fault, and logged; a request
// whose caller went away gets nothing more.
func Middleware(c *Client, key KeyFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, cost := key(r)
			if id == "" {
				next.ServeHTTP(w, r)
				return
			}
			d, err := c.Allow(r.Context(), id, cost)
			if err != nil {
				if r.Context().Err() == nil {
					slog.Error("quorate: rate limiter refused the check", slog.String("client", id), slog.Any("err", err))
					http.Error(w, "rate limiter check failed", http.StatusInternalServerError)
				}
				return
			}
			d.SetHeaders(w.Header())
			if !d.Allowed {
				if d.RetryAfterMs > 0 && w.Header().Get("Retry-After") == "" {
					w.Header().Set("Retry-After", strconv.FormatInt((d.RetryAfterMs+999)/1000, 10))
				}
				http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// ByHeader is a KeyFunc that charges each request one token to the value
// of header name (an API key header, say); requests without it pass.
func ByHeader(name string) KeyFunc {
	return func(r *http.Request) (string, int64) { return r.Header.Get(name), 1 }
}
