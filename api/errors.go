package api

import "net/http"

// Code is the stable, machine-readable part of an error answer.
type Code string

// Error codes. Each has one Kind and one HTTP status (see Lookup).
const (
	// 400: bad input. Nothing reached the cluster.
	CodeInvalidJSON      Code = "invalid_json"       // malformed JSON, not an object, trailing data, empty body
	CodeUnknownField     Code = "unknown_field"      // a member the endpoint does not know (names match case-sensitively)
	CodeDuplicateField   Code = "duplicate_field"    // a member given twice
	CodeInvalidClient    Code = "invalid_client"     // client missing, empty, too long, not UTF-8, control characters
	CodeInvalidCost      Code = "invalid_cost"       // cost negative, fractional, too large, not a number
	CodeInvalidRequestID Code = "invalid_request_id" // request_id too long, not UTF-8, control characters
	CodeInvalidPolicy    Code = "invalid_policy"     // capacity or refill_per_second missing or out of range
	CodeInvalidTierName  Code = "invalid_tier_name"  // a tier name the server refuses
	CodeInvalidTimeout   Code = "invalid_timeout"    // X-Quorate-Timeout-Ms not a positive integer
	CodeInvalidQuery     Code = "invalid_query"      // a query parameter with a value the endpoint refuses
	CodeEmptyBatch       Code = "empty_batch"        // a batch without requests
	CodeBatchTooLarge    Code = "batch_too_large"    // more requests than the server takes in one batch

	CodeUnauthenticated      Code = "unauthenticated"        // 401: no token, or one the node does not know
	CodeForbidden            Code = "forbidden"              // 403: a known token whose role may not call the route
	CodeCrossOrigin          Code = "cross_origin"           // 403: a browser request from another origin to a route that changes state
	CodeHostNotAllowed       Code = "host_not_allowed"       // 403: a node without auth answers only requests addressed to a loopback host
	CodeTierNotFound         Code = "tier_not_found"         // 404: deleting a tier that does not exist
	CodeNotFound             Code = "not_found"              // 404: no such route
	CodeMethodNotAllowed     Code = "method_not_allowed"     // 405: route exists, method does not
	CodeTooManyTiers         Code = "too_many_tiers"         // 409: creating a tier past the cap
	CodeClusterVersion       Code = "cluster_version"        // 409: the feature needs a cluster version the cluster has not reached
	CodeBodyTooLarge         Code = "body_too_large"         // 413: body over the endpoint's limit
	CodeUnsupportedMediaType Code = "unsupported_media_type" // 415: Content-Type not application/json

	// 503: the cluster could not answer; Retry-After says when to try again.
	CodeUnavailable    Code = "unavailable"      // the group has no leader or no quorum; nothing was decided
	CodeOutcomeUnknown Code = "outcome_unknown"  // the request may have been decided; retry with the same request_id to learn
	CodeShuttingDown   Code = "shutting_down"    // this node is stopping: try another
	CodeOverloaded     Code = "overloaded"       // the node has more work, or state, than it takes; nothing was decided
	CodeTooManyClients Code = "too_many_clients" // a new client past the node's --max-clients; known clients are served
	CodeRequestIDsFull Code = "request_ids_full" // a new request id while the group remembers the most ids it may; requests without ids and retries are served
	CodeDiskFull       Code = "disk_full"        // the node's data dir is nearly full; nothing was decided
	CodeTimeout        Code = "timeout"          // the deadline passed before the answer was applied: may have been decided
	CodeNotReady       Code = "not_ready"        // GET /readyz: some group has no leader

	CodeInternal Code = "internal" // 500: a bug or an unexpected failure, logged on the node
)

// Kind is what a caller may do after an error.
type Kind string

// Error kinds.
const (
	// Refused: nothing was decided, and the same request would be refused
	// again. Do not retry it as it is.
	Refused Kind = "refused"
	// RetrySafe: nothing was decided. Retry, on this node or any other.
	RetrySafe Kind = "retry_safe"
	// Unknown: the request may have been decided. Retry only with the same
	// request id, which returns the first decision if there was one.
	Unknown Kind = "unknown"
)

// Meaning is what the table says of a code.
type Meaning struct {
	Kind   Kind
	Status int // HTTP status
	// RetryAfter is the Retry-After the server sends with the code, in
	// seconds (0: none).
	RetryAfter int
	// GRPC is the gRPC status code a gRPC answer carries for the code
	// (google.golang.org/grpc/codes, whose numbers are part of the gRPC
	// protocol; this package imports nothing to name them).
	GRPC GRPCCode
}

// GRPCCode is a gRPC status code.
type GRPCCode uint32

// The gRPC status codes the table uses (the protocol's numbers).
const (
	GRPCUnknown            GRPCCode = 2
	GRPCInvalidArgument    GRPCCode = 3
	GRPCDeadlineExceeded   GRPCCode = 4
	GRPCNotFound           GRPCCode = 5
	GRPCPermissionDenied   GRPCCode = 7
	GRPCResourceExhausted  GRPCCode = 8
	GRPCFailedPrecondition GRPCCode = 9
	GRPCUnimplemented      GRPCCode = 12
	GRPCInternal           GRPCCode = 13
	GRPCUnavailable        GRPCCode = 14
	GRPCUnauthenticated    GRPCCode = 16
)

// codes is the one table of every code's kind, HTTP status and gRPC code.
// Every retry_safe code is gRPC UNAVAILABLE, the code gRPC clients retry;
// no other is.
var codes = map[Code]Meaning{
	CodeInvalidJSON:      {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},
	CodeUnknownField:     {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},
	CodeDuplicateField:   {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},
	CodeInvalidClient:    {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},
	CodeInvalidCost:      {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},
	CodeInvalidRequestID: {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},
	CodeInvalidPolicy:    {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},
	CodeInvalidTierName:  {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},
	CodeInvalidTimeout:   {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},
	CodeInvalidQuery:     {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},
	CodeEmptyBatch:       {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},
	CodeBatchTooLarge:    {Refused, http.StatusBadRequest, 0, GRPCInvalidArgument},

	CodeUnauthenticated:      {Refused, http.StatusUnauthorized, 0, GRPCUnauthenticated},
	CodeForbidden:            {Refused, http.StatusForbidden, 0, GRPCPermissionDenied},
	CodeCrossOrigin:          {Refused, http.StatusForbidden, 0, GRPCPermissionDenied},
	CodeHostNotAllowed:       {Refused, http.StatusForbidden, 0, GRPCPermissionDenied},
	CodeTierNotFound:         {Refused, http.StatusNotFound, 0, GRPCNotFound},
	CodeNotFound:             {Refused, http.StatusNotFound, 0, GRPCNotFound},
	CodeMethodNotAllowed:     {Refused, http.StatusMethodNotAllowed, 0, GRPCUnimplemented},
	CodeTooManyTiers:         {Refused, http.StatusConflict, 0, GRPCResourceExhausted},
	CodeClusterVersion:       {Refused, http.StatusConflict, 0, GRPCFailedPrecondition},
	CodeBodyTooLarge:         {Refused, http.StatusRequestEntityTooLarge, 0, GRPCResourceExhausted},
	CodeUnsupportedMediaType: {Refused, http.StatusUnsupportedMediaType, 0, GRPCInvalidArgument},

	CodeUnavailable:    {RetrySafe, http.StatusServiceUnavailable, 1, GRPCUnavailable},
	CodeOutcomeUnknown: {Unknown, http.StatusServiceUnavailable, 1, GRPCUnknown},
	CodeShuttingDown:   {RetrySafe, http.StatusServiceUnavailable, 1, GRPCUnavailable},
	CodeOverloaded:     {RetrySafe, http.StatusServiceUnavailable, 1, GRPCUnavailable},
	CodeTooManyClients: {RetrySafe, http.StatusServiceUnavailable, 1, GRPCUnavailable},
	CodeRequestIDsFull: {RetrySafe, http.StatusServiceUnavailable, 1, GRPCUnavailable},
	CodeDiskFull:       {RetrySafe, http.StatusServiceUnavailable, 5, GRPCUnavailable},
	CodeTimeout:        {Unknown, http.StatusServiceUnavailable, 1, GRPCDeadlineExceeded},
	CodeNotReady:       {RetrySafe, http.StatusServiceUnavailable, 1, GRPCUnavailable},

	CodeInternal: {Unknown, http.StatusInternalServerError, 0, GRPCInternal},
}

// Lookup returns what the table says of c, and false for a code it does
// not know (a newer server's): treat that by its HTTP status (KindOfStatus).
func Lookup(c Code) (Meaning, bool) {
	m, ok := codes[c]
	return m, ok
}

// KindOf returns c's kind; a code this package does not know is Unknown,
// the kind that never leads a caller to spend twice.
func KindOf(c Code) Kind {
	if m, ok := codes[c]; ok {
		return m.Kind
	}
	return Unknown
}

// Codes returns every code the table knows.
func Codes() []Code {
	out := make([]Code, 0, len(codes))
	for c := range codes {
		out = append(out, c)
	}
	return out
}
