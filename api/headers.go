package api

// Header names the API reads and writes.
const (
	// HeaderTimeout is the caller's deadline for one call, in whole
	// milliseconds (the server caps it); the server's default applies
	// without it.
	HeaderTimeout = "X-Quorate-Timeout-Ms"
	// HeaderRetryAfter is sent with 429-style denials and every 503, in
	// seconds.
	HeaderRetryAfter = "Retry-After"
	// The RateLimit fields of every decision answer: today's trio.
	HeaderRateLimitLimit     = "RateLimit-Limit"
	HeaderRateLimitRemaining = "RateLimit-Remaining"
	HeaderRateLimitReset     = "RateLimit-Reset"
)
