package checker

import (
	"cmp"
	"math"
	"slices"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// decision is one answer the checkers treat as a decision (or read).
type decision struct {
	// op carries the answer; for an info op resolved by a duplicate answer
	// it is the duplicate's answer with Invoke taken from the earliest
	// attempt and Complete from the duplicate.
	op history.Op
	// idx is the index in History.Ops of the op the answer came from.
	idx int
}

// keyHistory is one key's operations, sorted out.
type keyHistory struct {
	key  string
	tier string
	// decisions are the allow decisions known to have been made: ok answers
	// that are not duplicates, and info ops a duplicate answer resolved.
	decisions []decision
	// reads are ok reads.
	reads []decision
	// unknown are allow ops that may or may not have been applied: info ops
	// no answer resolved (one per request id, spanning from its earliest
	// info attempt's invoke to its latest one's completion).
	unknown []decision
	// dups are duplicate answers (not decisions).
	dups []decision
}

// dupIssue is something wrong with request-id idempotency.
type dupIssue struct {
	kind string // "applied twice", "mismatch", "orphan"
	key  string
	op   history.Op
	orig history.Op
}

// prepared is a history sorted out by key.
type prepared struct {
	keys     []*keyHistory // sorted by key
	issues   []dupIssue
	resolved int // info ops resolved by a duplicate answer
	dropped  int // info ops dropped because their request id was decided by another attempt
}

// prepare groups h's allow and read attempts by key and settles request
// ids (an attempt is one history.Op; the attempts of a request share its
// key and request id):
//
//   - fail attempts decided nothing, on the server's word;
//   - ok answers that are not duplicates are decisions; two of them for one
//     (key, request id) mean the request was applied twice (an issue);
//   - a duplicate answer is checked against the request's decision (an
//     issue if they differ); if the request's other attempts are info
//     ones, the duplicate resolves them into one decision, made between
//     the earliest attempt's invoke and the duplicate's completion;
//   - a duplicate answer of a request whose other attempts all failed (or
//     that has none) is an issue, an "orphan": the server said nothing was
//     decided, and then answered from a decision. It still proves the
//     request was applied, so it is also a decision, made between the
//     earliest attempt's invoke and the duplicate's completion, for the
//     other checkers to count;
//   - info attempts of a request that has an ok non-duplicate answer are
//     dropped: the cluster applies a request id at most once, so they were
//     either that decision or no-ops;
//   - the remaining info attempts of one request id are one unknown op,
//     invoked at the earliest attempt and completed at the latest one.
//
// Request ids are remembered by the cluster for its dedup window (2
// minutes); a history whose retries span longer may be judged wrongly.
func prepare(h history.History, p Params) prepared {
	var out prepared
	byKey := map[string]*keyHistory{}
	type group struct{ oks, dups, infos, fails []decision }
	groups := map[[2]string]*group{}
	var order [][2]string
	get := func(key string) *keyHistory {
		kh := byKey[key]
		if kh == nil {
			kh = &keyHistory{key: key}
			byKey[key] = kh
		}
		return kh
	}
	for i, op := range h.Ops {
		if op.Outcome == history.OutcomeFail && (op.RequestID == "" || op.Kind != history.KindAllow) {
			continue
		}
		kh := get(op.Key)
		d := decision{op: op, idx: i}
		switch op.Kind {
		case history.KindRead:
			if op.Outcome == history.OutcomeOK && !op.Duplicate {
				kh.reads = append(kh.reads, d)
			}
			continue
		case history.KindAllow:
		default:
			continue
		}
		if op.RequestID == "" {
			switch {
			case op.Outcome == history.OutcomeInfo:
				kh.unknown = append(kh.unknown, d)
			case op.Duplicate:
				out.issues = append(out.issues, dupIssue{kind: "orphan", key: op.Key, op: op})
			default:
				kh.decisions = append(kh.decisions, d)
			}
			continue
		}
		gk := [2]string{op.Key, op.RequestID}
		g := groups[gk]
		if g == nil {
			g = &group{}
			groups[gk] = g
			order = append(order, gk)
		}
		switch {
		case op.Outcome == history.OutcomeFail:
			g.fails = append(g.fails, d)
		case op.Outcome == history.OutcomeInfo:
			g.infos = append(g.infos, d)
		case op.Duplicate:
			g.dups = append(g.dups, d)
		default:
			g.oks = append(g.oks, d)
		}
	}
	byInvoke := func(a, b decision) int { return cmp.Compare(a.op.Invoke, b.op.Invoke) }
	for _, gk := range order {
		g := groups[gk]
		kh := get(gk[0])
		slices.SortStableFunc(g.oks, byInvoke)
		slices.SortStableFunc(g.dups, byInvoke)
		slices.SortStableFunc(g.infos, byInvoke)
		slices.SortStableFunc(g.fails, byInvoke)
		kh.dups = append(kh.dups, g.dups...)
		switch {
		case len(g.oks) > 0:
			kh.decisions = append(kh.decisions, g.oks...)
			for _, d := range g.oks[1:] {
				out.issues = append(out.issues, dupIssue{kind: "applied twice", key: gk[0], op: d.op, orig: g.oks[0].op})
			}
			for _, d := range g.dups {
				if !sameDecision(d.op, g.oks[0].op) {
					out.issues = append(out.issues, dupIssue{kind: "mismatch", key: gk[0], op: d.op, orig: g.oks[0].op})
				}
			}
			out.dropped += len(g.infos)
		case len(g.dups) > 0:
			first := g.dups[0]
			for _, d := range g.dups[1:] {
				if !sameDecision(d.op, first.op) {
					out.issues = append(out.issues, dupIssue{kind: "mismatch", key: gk[0], op: d.op, orig: first.op})
				}
			}
			if len(g.infos) == 0 {
				out.issues = append(out.issues, dupIssue{kind: "orphan", key: gk[0], op: first.op})
			}
			// Made after the earliest attempt that may have applied it was
			// sent, before the first duplicate answer came back:
			res := first.op
			res.Duplicate = false
			res.Complete = first.op.Complete
			for _, d := range g.dups {
				res.Complete = min(res.Complete, d.op.Complete)
			}
			// the earliest attempt that may have applied it: an info one,
			// else (an orphan) a fail one that was not what it said.
			idx, from := first.idx, g.infos
			if len(from) == 0 {
				from = g.fails
			}
			if len(from) > 0 && from[0].op.Invoke < res.Invoke {
				res.Invoke, idx = from[0].op.Invoke, from[0].idx
			}
			kh.decisions = append(kh.decisions, decision{op: res, idx: idx})
			if len(g.infos) > 0 {
				out.resolved++
				out.dropped += len(g.infos) - 1
			}
		case len(g.infos) > 0:
			u := g.infos[0]
			for _, d := range g.infos[1:] {
				u.op.Complete = max(u.op.Complete, d.op.Complete)
			}
			kh.unknown = append(kh.unknown, u)
			out.dropped += len(g.infos) - 1
		}
	}
	for _, kh := range byKey {
		slices.SortStableFunc(kh.decisions, byInvoke)
		slices.SortStableFunc(kh.reads, byInvoke)
		slices.SortStableFunc(kh.unknown, byInvoke)
		kh.tier = keyTier(kh, p, h)
		out.keys = append(out.keys, kh)
	}
	slices.SortFunc(out.keys, func(a, b *keyHistory) int { return cmp.Compare(a.key, b.key) })
	return out
}

// keyTier is the key's initial tier: from Params, else its first ok answer
// completed before any tier assignment of the key was invoked, else the
// default.
func keyTier(kh *keyHistory, p Params, h history.History) string {
	if t, ok := p.KeyTiers[kh.key]; ok && t != "" {
		return t
	}
	moved := int64(math.MaxInt64)
	for _, a := range h.Assignments {
		if a.Key == kh.key {
			moved = min(moved, a.Invoke)
		}
	}
	first := int64(0)
	tier := ""
	for _, ds := range [][]decision{kh.decisions, kh.reads} {
		for _, d := range ds {
			if d.op.Tier != "" && d.op.Complete < moved && (tier == "" || d.op.Invoke < first) {
				tier, first = d.op.Tier, d.op.Invoke
			}
		}
	}
	if tier == "" {
		return bucket.DefaultTierName
	}
	return tier
}

// sameDecision reports whether a duplicate answer repeats the original
// decision exactly.
func sameDecision(dup, orig history.Op) bool {
	return dup.Allowed == orig.Allowed && dup.Remaining == orig.Remaining && dup.Limit == orig.Limit &&
		dup.Stamp == orig.Stamp && dup.Cost == orig.Cost && (dup.Tier == "" || orig.Tier == "" || dup.Tier == orig.Tier)
}
