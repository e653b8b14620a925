package httpapi

import "net/http"

// ClientOption configures a Client (NewClient).
type ClientOption func(*Client)

// WithToken makes the Client send token as "Authorization: Bearer <token>"
// on every call. An empty token sends nothing.
func WithToken(token string) ClientOption {
	return func(c *Client) {
		if token != "" {
			c.auth = "Bearer " + token
		}
	}
}

// BearerTransport wraps next so that every request through it carries
// token as "Authorization: Bearer <token>" (nothing when token is empty),
// for callers that use their own http.Client, such as load generators.
func BearerTransport(next http.RoundTripper, token string) http.RoundTripper {
	if token == "" {
		return next
	}
	return bearer{next: next, value: "Bearer " + token}
}

type bearer struct {
	next  http.RoundTripper
	value string
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	req.Header.Set("Authorization", b.value)
	return b.next.RoundTrip(req)
}
