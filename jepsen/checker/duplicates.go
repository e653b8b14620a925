package checker

import "github.com/quorate/quorate/jepsen/history"

// Duplicates checks request-id idempotency over the raw attempts: an
// answer marked duplicate must repeat the original decision for the same
// key and request id exactly (allowed, remaining, limit, stamp, cost), a
// request id must never be decided twice (two ok answers that are not
// duplicates), and a duplicate answer must have an original attempt that
// may have been applied: if every other attempt failed (a 4xx, or a 503
// whose code says nothing was decided), the server broke its word on one
// of them. Duplicates that resolve an info attempt are counted as resolved.
func Duplicates(h history.History, p Params) Result {
	r := newReport("duplicates", p)
	c := newClock(h)
	prep := prepare(h, p)
	counts := map[string]int{}
	for _, is := range prep.issues {
		counts[is.kind]++
		switch is.kind {
		case "applied twice":
			r.fail("key %q: request %s decided twice: %s and %s", is.key, is.op.RequestID, describe(c, is.orig), describe(c, is.op))
		case "mismatch":
			r.fail("key %q: duplicate answer %s differs from the original decision %s", is.key, describe(c, is.op), describe(c, is.orig))
		default:
			r.fail("key %q: duplicate answer %s, but every other attempt of the request was answered \"nothing decided\"", is.key, describe(c, is.op))
		}
	}
	dups := 0
	for _, kh := range prep.keys {
		dups += len(kh.dups)
	}
	r.set("duplicate_answers", dups)
	r.set("resolved_info", prep.resolved)
	r.set("superseded_info", prep.dropped)
	r.set("applied_twice", counts["applied twice"])
	r.set("mismatched", counts["mismatch"])
	r.set("orphaned", counts["orphan"])
	return r.result()
}
