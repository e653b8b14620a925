package checker

import (
	"slices"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// Accounting checks the keys of Params.AccountKeys, which must be under one
// refill-free policy (rate 0) for the whole run, by counting tokens: with
// no refill, the tokens consumed, capacity - final balance, are exactly
// what the applied requests took. So they must lie between what the
// acknowledged admissions took (every ok, allowed decision, duplicates
// counted once) and that plus what the operations of unknown outcome asked
// for. Fewer means an acknowledged admission was lost; more means tokens
// were taken by requests the server answered as denied or as never
// decided (a 503 that promised nothing), or by a request applied twice.
//
// The final balance is the key's last ok read (GET /v1/clients/{key}),
// which must be invoked after every allow attempt on the key completed
// (the runner reads after healing, once every group serves again, so no
// entry of the run can still commit). The check is exact and needs no
// clock or model: it holds for requests without request ids, which the
// linearizability search can only bound.
func Accounting(h history.History, p Params) Result {
	r := newReport("accounting", p)
	prep := prepare(h, p)
	byKey := map[string]*keyHistory{}
	for _, kh := range prep.keys {
		byKey[kh.key] = kh
	}
	lastAllow := map[string]int64{}
	for _, op := range h.Ops {
		if op.Kind == history.KindAllow {
			lastAllow[op.Key] = max(lastAllow[op.Key], op.Complete)
		}
	}
	var checked, over, under int
	var consumedAll, ackedAll, unknownAll int64
	worstOver, worstUnder := int64(0), int64(0)
	keys := slices.Clone(p.AccountKeys)
	slices.Sort(keys)
	for _, key := range keys {
		kh := byKey[key]
		if kh == nil {
			continue // never used: nothing to account for
		}
		kp := p.policiesOf(h, kh, nil)
		pols := kp.candidates(h.Span())
		if slices.ContainsFunc(pols, func(pol bucket.Policy) bool { return pol.Rate != 0 || pol.Capacity != pols[0].Capacity }) {
			r.fail("key %q: an accounting key must stay under one policy with rate 0; it may be under %v", key, pols)
			continue
		}
		var final *history.Op
		for i := range kh.reads {
			if op := kh.reads[i].op; final == nil || op.Invoke > final.Invoke {
				final = &kh.reads[i].op
			}
		}
		if final == nil || final.Invoke <= lastAllow[key] {
			r.fail("key %q: no read of the final balance after the key's last request", key)
			continue
		}
		var acked, unknown int64
		for _, d := range kh.decisions {
			if d.op.Allowed {
				acked += d.op.Cost
			}
		}
		for _, d := range kh.unknown {
			unknown += d.op.Cost
		}
		consumed := final.Limit - final.Remaining
		checked++
		consumedAll, ackedAll, unknownAll = consumedAll+consumed, ackedAll+acked, unknownAll+unknown
		switch {
		case consumed < acked:
			under++
			worstUnder = max(worstUnder, acked-consumed)
			r.fail("key %q: %d tokens consumed (capacity %d - final balance %d), fewer than the %d acknowledged admissions took: %d acknowledged tokens lost",
				key, consumed, final.Limit, final.Remaining, acked, acked-consumed)
		case consumed > acked+unknown:
			over++
			worstOver = max(worstOver, consumed-acked-unknown)
			r.fail("key %q: %d tokens consumed (capacity %d - final balance %d), but acknowledged admissions took %d and operations of unknown outcome asked for %d: %d tokens taken by requests answered as denied or never decided",
				key, consumed, final.Limit, final.Remaining, acked, unknown, consumed-acked-unknown)
		}
	}
	r.set("keys", checked)
	r.set("consumed_tokens", consumedAll)
	r.set("acked_tokens", ackedAll)
	r.set("unknown_tokens", unknownAll)
	r.set("keys_over", over)
	r.set("keys_under", under)
	r.set("worst_unexplained_tokens", worstOver)
	r.set("worst_lost_tokens", worstUnder)
	return r.result()
}
