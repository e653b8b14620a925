// Package client is the Go client a service adopts quorate with: Allow
// asks whether a client may spend tokens, and Middleware limits an
// http.Handler.
//
//	c, err := client.New(client.Config{
//		Endpoints:     []string{"https://q1:7070", "https://q2:7070", "https://q3:7070"},
//		Token:         os.Getenv("QUORATE_TOKEN"),
//		OnUnavailable: client.FailLocal,
//		Instances:     4, // processes sharing the limits
//	})
//	...
//	d, err := c.Allow(ctx, "customer-42", 1)
//	if err == nil && !d.Allowed { /* 429 */ }
//
// Each decision goes straight to its group's leader (GET /v1/routes),
// carries a request id, and is retried on another node where that is safe,
// within the context's deadline; concurrent decisions bound for one node
// travel together as one batch. When no node can decide in time,
// Config.OnUnavailable says what Allow answers: FailClosed, FailOpen or
// FailLocal (the README's "Use it from your service" gives what each adds
// to the over-admission bound).
//
// The package speaks only the public wire format of package api: a program
// that imports it links no raft, storage or gossip code (a test keeps it so).
package client
