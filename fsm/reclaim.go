package fsm

import "github.com/quorate/quorate/bucket"

// Reclaimable reports whether a Reclaim stamped now would forget anything
// (a bucket, once it is full again; a remembered decision, origin mark or
// audit record past its time), so that a leader proposes one only then.
// Memory of requests outlives the buckets they spent, so a group with no
// buckets may still have something to forget.
func (f *FSM) Reclaimable(now int64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	now = max(now, f.highWater)
	return f.buckets.len()+f.windows.len() > 0 ||
		f.ids.expired(now) || f.byOrigin.expired(now) || f.marksExpired(now) ||
		f.records.len() > 0 && f.recordsFloor < now-RecordRetention
}

// applyReclaim forgets what the group no longer needs, at the group time
// of the entry's stamp: full buckets (indistinguishable from absent ones),
// empty windows, remembered decisions past their window, origin marks past
// their life and audit records past their retention.
func (f *FSM) applyReclaim(r Reclaim) *ReclaimResult {
	now := f.advance(r.Stamp)
	res := &ReclaimResult{Dedup: f.ids.expire(now) + f.byOrigin.expire(now)}
	f.pruneMarks(now)
	f.pruneRecords(now)
	// Each deletion depends only on its own bucket, so map order cannot
	// change the outcome.
	res.Buckets = f.buckets.deleteIf(func(client string, s bucket.State) bool {
		assigned, _ := f.tiers.get(client)
		_, p := f.config.Resolve(assigned)
		full := bucket.IsFull(p, s, now)
		if full {
			f.mapBytes -= bucketBytes(client)
		}
		return full
	})
	res.Buckets += f.windows.deleteIf(func(client string, w bucket.Window) bool {
		assigned, _ := f.tiers.get(client)
		_, p := f.config.Resolve(assigned)
		empty := bucket.WindowEmpty(p, w, now)
		if empty {
			f.mapBytes -= bucketBytes(client) + bucket.WindowBytes(w)
		}
		return empty
	})
	return res
}
