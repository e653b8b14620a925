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
	// The RateLimit fields of every single-decision answer: the trio of the
	// earlier IETF drafts, still the most widely read.
	HeaderRateLimitLimit     = "RateLimit-Limit"
	HeaderRateLimitRemaining = "RateLimit-Remaining"
	HeaderRateLimitReset     = "RateLimit-Reset"
	// The structured fields of draft-ietf-httpapi-ratelimit-headers-11,
	// on the same answers (see AllowResponse.SetHeaders).
	HeaderRateLimitPolicy = "RateLimit-Policy"
	HeaderRateLimit       = "RateLimit"
	// HeaderRoutesVersion is on every answer of POST /v1/allow and
	// /v1/allow/batch: the answering node's routes version, the number GET
	// /v1/routes returns as "version" (it rises at every leadership
	// change). A caller that routes by GET /v1/routes refreshes its table
	// when an answer's version is higher than its table's.
	HeaderRoutesVersion = "X-Quorate-Routes-Version"
	// HeaderBackupError is a trailer of GET /v1/backup: empty when the
	// backup is whole, else why it stopped part-way (the body is then an
	// incomplete backup, which every reader refuses).
	HeaderBackupError = "X-Quorate-Backup-Error"
	// ContentTypeBackup is the media type of a backup.
	ContentTypeBackup = "application/vnd.quorate.backup"
)
