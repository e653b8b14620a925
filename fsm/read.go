package fsm

import (
	"errors"

	"github.com/quorate/quorate/bucket"
)

// ErrNoSuchTier is returned (wrapped) when deleting a tier that does not exist.
var ErrNoSuchTier = errors.New("no such tier")

// ClientView is a client's state as seen at some time, without consuming.
type ClientView struct {
	Client string
	// AssignedTier is the tier the client is assigned to ("" if none); it may
	// name a tier that does not exist, in which case Tier is the default.
	AssignedTier string
	// Tier is the tier whose policy applies, or bucket.DefaultTierName.
	Tier   string
	Policy bucket.Policy
	// Known reports whether the group holds a bucket for the client; a client
	// without one has a full bucket.
	Known bool
	// Decision is what a cost-1 request would get at the view's time.
	Decision bucket.Decision
	// At is the group time the view was computed at.
	At int64
	// Record is what the group remembers of the operator actions on the
	// client (the zero record if none).
	Record ClientRecord
}

// Config returns the configuration in force. The caller must not modify its
// Tiers map.
func (f *FSM) Config() bucket.Config {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.config
}

// Resolve returns the tier and policy client is decided by in this
// replica's state, and the configuration version they come from (0: the
// replica has no configuration yet).
func (f *FSM) Resolve(client string) (string, bucket.Policy, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	assigned, _ := f.tiers.get(client)
	tier, p := f.config.Resolve(assigned)
	return tier, p, f.config.Version
}

// ConfigVersion returns the version of the configuration in force (0
// until one is installed), without taking the FSM's lock.
func (f *FSM) ConfigVersion() uint64 { return f.version.Load() }

// RequestIDsEvictedEarly counts the request ids this replica forgot before
// their window ended, because the group held the most ids it may remember
// (Options.DedupMax). A retry of such an id is decided afresh, and marked
// MaybeDuplicate.
func (f *FSM) RequestIDsEvictedEarly() uint64 { return f.evictedEarly.Load() }

// HighWater returns the group's time: the largest stamp applied so far.
func (f *FSM) HighWater() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.highWater
}

// AppliedIndex returns the index of the last raft entry applied.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// Buckets returns how many buckets the group holds, without taking the
// FSM's lock (as of the last applied batch of entries).
func (f *FSM) Buckets() int { return int(f.nBuckets.Load()) }

// Known reports whether the group holds a bucket for client.
func (f *FSM) Known(client string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.buckets.get(client)
	_, inWindows := f.windows.get(client)
	return ok || inWindows
}

// Remembered returns how many decisions the group remembers by request id
// and by origin.
func (f *FSM) Remembered() (byID, byOrigin int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ids.len(), f.byOrigin.len()
}

// Stats returns the number of buckets, tier assignments and remembered
// request ids.
func (f *FSM) Stats() (buckets, assignments, requestIDs int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.buckets.len() + f.windows.len(), f.tiers.len(), f.ids.len()
}

// View returns client's state at max(now, high water) without changing it.
func (f *FSM) View(client string, now int64) ClientView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	now = max(now, f.highWater)
	assigned, _ := f.tiers.get(client)
	tier, p := f.config.Resolve(assigned)
	v := ClientView{Client: client, AssignedTier: assigned, Tier: tier, Policy: p, At: now}
	v.Record, _ = f.records.get(client)
	if p.Algorithm == bucket.SlidingWindow {
		var w bucket.Window
		w, v.Known = f.windows.get(client)
		v.Decision = bucket.PeekWindow(p, w, now, 1)
		return v
	}
	s, known := f.buckets.get(client)
	if !known {
		s = bucket.New(p, now)
	}
	v.Known = known
	v.Decision = bucket.Peek(p, s, now, 1)
	return v
}
