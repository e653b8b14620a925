package client

import "sync/atomic"

// Stats counts what a Client did since New, for a service to export as its
// own metrics. Every field only grows.
type Stats struct {
	// Calls is the number of Allow and Do calls; Decided of them were
	// decided by the cluster, Refused ended in a refused error.
	Calls, Decided, Refused uint64
	// FailedClosed, FailedOpen and FailedLocal are the calls answered by
	// Config.OnUnavailable because no node decided in time; Broken of them
	// were answered at once, by an open breaker (Config.BreakFor).
	FailedClosed, FailedOpen, FailedLocal, Broken uint64
	// Attempts is the number of attempts at a node; Retries of them were
	// not a call's first.
	Attempts, Retries uint64
	// Batches is the number of coalesced calls (POST /v1/allow/batch) and
	// Batched the decisions they carried.
	Batches, Batched uint64
	// RouteRefreshes is the number of routes tables fetched.
	RouteRefreshes uint64
}

type counters struct {
	calls, decided, refused               atomic.Uint64
	failedClosed, failedOpen, failedLocal atomic.Uint64
	broken                                atomic.Uint64
	attempts, retries                     atomic.Uint64
	batches, batched                      atomic.Uint64
	routeRefreshes                        atomic.Uint64
}

// Stats returns the client's counters now.
func (c *Client) Stats() Stats {
	s := &c.stats
	return Stats{
		Calls: s.calls.Load(), Decided: s.decided.Load(), Refused: s.refused.Load(),
		FailedClosed: s.failedClosed.Load(), FailedOpen: s.failedOpen.Load(), FailedLocal: s.failedLocal.Load(), Broken: s.broken.Load(),
		Attempts: s.attempts.Load(), Retries: s.retries.Load(),
		Batches: s.batches.Load(), Batched: s.batched.Load(),
		RouteRefreshes: s.routeRefreshes.Load(),
	}
}
