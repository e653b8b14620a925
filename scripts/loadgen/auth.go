package main

import "net/http"

// bearer sends token as "Authorization: Bearer <token>" on every request
// through next: a cluster from scripts/cluster.sh takes the API tokens of
// its auth file (the admin token is in <cluster dir>/token).
type bearer struct {
	next  http.RoundTripper
	token string
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.token == "" {
		return b.next.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}
