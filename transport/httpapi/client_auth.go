package httpapi

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
