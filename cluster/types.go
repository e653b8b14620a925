package cluster

import "github.com/quorate/quorate/cluster/errs"

// Errors returned by Node methods, defined in package errs (where each is
// documented) so that every layer below the Node answers with the same
// values. Each is an *Error carrying the API code (and so the kind) it is
// answered with: the HTTP layer answers an error with Classify's.
var (
	ErrUnavailable    = errs.ErrUnavailable    // no leader or no quorum by the deadline; nothing decided
	ErrOutcomeUnknown = errs.ErrOutcomeUnknown // may have been appended; retry with the same request id to learn
	ErrOverloaded     = errs.ErrOverloaded     // refused at once, nothing decided
	ErrTooManyClients = errs.ErrTooManyClients // a new client past Options.MaxClients, nothing decided
	ErrRequestIDsFull = errs.ErrRequestIDsFull // a new request id past the group's memory of ids, nothing decided
	ErrDiskFull       = errs.ErrDiskFull       // below Options.MinFreeDisk, nothing appended
	ErrShuttingDown   = errs.ErrShuttingDown   // the node is stopping, nothing appended
	ErrClusterVersion = errs.ErrClusterVersion // needs a higher cluster version, nothing appended
)

// Error is the type of the errors above.
type Error = errs.Error

// Classify returns the first *Error in err's chain: how the error was
// classified where it happened (see errs.Classify).
func Classify(err error) (*Error, bool) { return errs.Classify(err) }
