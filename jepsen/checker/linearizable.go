package checker

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// Linearizable checks each key's history with porcupine against the exact
// token-bucket model (see bucketModel): some order of its operations,
// consistent with real time and with non-decreasing stamps, must reproduce
// every ok answer (allowed, remaining, limit; reads: remaining, limit) from
// a full bucket under the policies in force.
//
// What goes in, per key: ok decisions and reads over [Invoke, Complete],
// narrowed by their stamps (tighten); info allows, after prepare settles
// request ids, as pending ops that may be applied at any later point no
// earlier than Invoke - ClockSlack, or never (see bucketModel); the tier's
// policy changes over [invoke, ack], or [invoke, +∞) and maybe never if not
// acked (an unknown invoke is -∞); the key's tier assignments the same way
// (History.Assignments), with the policy changes of every tier the key may
// be in (the model applies a tier's changes to the key only while it is in
// that tier, and a move switches the key to its new tier's current policy,
// the balance carrying over). Fail ops and duplicate answers are left
// out (Duplicates checks those). A change made with on_raise fill refills
// the key where it is applied if it raises the capacity of the key's tier
// then (see bucketModel). Keys that may be under a sliding window are left
// out: the model is a token bucket's, and Windows checks them by their
// stamps.
//
// Sound when: stamps are the group time (max of the leader's stamp and the
// group's high water, as the API returns them), keys start with no bucket
// in their Params.KeyTiers tier (or keyTier's guess), their tier changes
// only by recorded assignments, and a decision is made inside its op's
// interval (the clock assumptions of the package doc). A key the search
// cannot decide within Params.Timeout makes the result invalid.
func Linearizable(h history.History, p Params) Result {
	r := newReport("linearizable", p)
	c := newClock(h)
	if err := p.Default.Validate(); err != nil {
		r.fail("params: default policy: %v", err)
		return r.result()
	}
	prep := prepare(h, p)
	slack := p.clockSlack(h)
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)

	type outcome struct {
		res      porcupine.CheckResult
		skipped  bool // a key that may be under a sliding window
		conflict string
		info     porcupine.LinearizationInfo
		model    porcupine.Model
		ops      []porcupine.Operation
	}
	outs := make([]outcome, len(prep.keys))
	var stats ModelStats
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(prep.keys), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				kh := prep.keys[i]
				kp := p.policiesOf(h, kh, nil)
				if windows, _ := kp.kinds(); windows {
					outs[i] = outcome{res: porcupine.Ok, skipped: true}
					continue
				}
				var initial []bucket.Policy
				for _, t := range kp.tiers.all() {
					initial = append(initial, kp.timelines[t].initial)
				}
				model := bucketModel(&stats, initial...)
				ops := keyOperations(kh, kp, h, slack)
				if y, z, ok := tighten(ops); !ok {
					outs[i] = outcome{res: porcupine.Illegal, model: model, ops: ops,
						conflict: fmt.Sprintf("stamps contradict real time: %s completed before %s was invoked, yet must come after it by stamp",
							describe(c, h.Ops[ops[z].Input.(step).idx]), describe(c, h.Ops[ops[y].Input.(step).idx]))}
					continue
				}
				left := time.Until(deadline)
				if left <= 0 {
					outs[i] = outcome{res: porcupine.Unknown, model: model, ops: ops}
					continue
				}
				// The verbose search records partial linearizations at every
				// backtrack, which costs O(n) each: run it only to explain a
				// failure.
				started := time.Now()
				res := porcupine.CheckOperationsTimeout(model, ops, left)
				var info porcupine.LinearizationInfo
				if res == porcupine.Illegal {
					// Cut short, the search still returns the longest
					// partial linearizations found so far.
					budget := min(time.Until(deadline), max(2*time.Second, time.Since(started)))
					_, info = porcupine.CheckOperationsVerbose(model, ops, max(budget, 100*time.Millisecond))
				}
				outs[i] = outcome{res: res, info: info, model: model, ops: ops}
			}
		}()
	}
	for i := range prep.keys {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	vis := &Visualization{}
	checked, ops, illegal, unknown, infos, changes, moves, fills, windowKeys := 0, 0, 0, 0, 0, 0, 0, 0, 0
	for i, kh := range prep.keys {
		o := outs[i]
		if o.skipped {
			windowKeys++
			continue
		}
		checked++
		ops += len(o.ops)
		infos += len(kh.unknown)
		for _, op := range o.ops {
			switch op.Input.(step).kind {
			case stepPolicy:
				changes++
				if op.Input.(step).fill {
					fills++
				}
			case stepAssign:
				moves++
			}
		}
		switch o.res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			unknown++
			r.fail("key %q: linearizability not decided within %s (%d ops)", kh.key, timeout, len(o.ops))
		case porcupine.Illegal:
			illegal++
			if o.conflict != "" {
				r.fail("key %q (tier %q): not linearizable: %s", kh.key, kh.tier, o.conflict)
				continue // nothing for porcupine to show
			}
			r.fail("key %q (tier %q): not linearizable: %s", kh.key, kh.tier, explain(c, h, o.model, o.ops, o.info))
		}
		if len(o.info.PartialLinearizations()) > 0 {
			vis.add(kh.key, o.model, o.info)
		}
	}
	if len(vis.keys) > 0 {
		r.summary["visualized_keys"] = len(vis.keys)
	}
	r.set("keys", checked)
	r.set("ops", ops)
	r.set("info_ops", infos)
	r.set("policy_ops", changes)
	r.set("assignment_ops", moves)
	r.set("fill_ops", fills)
	r.set("window_keys_left_to_windows", windowKeys)
	stats.report(r)
	r.set("illegal_keys", illegal)
	r.set("undecided_keys", unknown)
	res := r.result()
	if len(vis.keys) > 0 {
		res.Visualization = vis
	}
	return res
}

// keyOperations turns one key's history into porcupine operations.
func keyOperations(kh *keyHistory, kp keyPolicies, h history.History, slack int64) []porcupine.Operation {
	clients := map[int]int{}
	client := func(process int) int {
		id, ok := clients[process]
		if !ok {
			id = len(clients)
			clients[process] = id
		}
		return id
	}
	var ops []porcupine.Operation
	add := func(op history.Op, in step, ret int64) {
		ops = append(ops, porcupine.Operation{
			ClientId: client(op.Process), Input: in, Call: op.Invoke, Return: max(ret, op.Invoke),
			Metadata: fmt.Sprintf("process %d node %s request %q", op.Process, op.Node, op.RequestID),
		})
	}
	for _, d := range kh.decisions {
		op := d.op
		add(op, step{kind: stepAllow, cost: op.Cost, stamp: op.Stamp, allowed: op.Allowed,
			remaining: op.Remaining, limit: op.Limit, idx: d.idx}, op.Complete)
	}
	for _, d := range kh.reads {
		op := d.op
		add(op, step{kind: stepRead, stamp: op.Stamp, remaining: op.Remaining, limit: op.Limit, idx: d.idx}, op.Complete)
	}
	for _, d := range kh.unknown {
		// The model lets a pending op settle in any later gap, so placing
		// it at its invoke loses nothing (and spares the search from trying
		// every later place).
		op := d.op
		add(op, step{kind: stepAllow, info: true, cost: op.Cost, earliest: op.Invoke - slack, idx: d.idx}, op.Invoke)
	}
	policyClient := -1
	latest := func(ack int64) int64 {
		if ack == math.MaxInt64 {
			return ack
		}
		return ack + slack
	}
	// The policy changes of every tier the key may be in (the model
	// applies them to the key only while it is in that tier), and the
	// key's tier assignments.
	tiers := kp.tiers.all()
	for ti, tier := range tiers {
		for _, ch := range kp.timelines[tier].changes {
			if policyClient < 0 {
				policyClient = client(math.MinInt)
			}
			pc := h.Policies[ch.idx]
			ops = append(ops, porcupine.Operation{
				ClientId: policyClient,
				Input: step{kind: stepPolicy, pol: ch.pol, maybe: ch.ack == math.MaxInt64, fill: ch.fill, sure: ch.sure,
					latest: latest(ch.ack), tier: ti, idx: ch.idx},
				Call: ch.from, Return: ch.ack,
				Metadata: fmt.Sprintf("policy change %d of tier %q (version %d)", ch.idx, pc.Tier, pc.Version),
			})
		}
	}
	for _, m := range kp.tiers.moves {
		if policyClient < 0 {
			policyClient = client(math.MinInt)
		}
		ops = append(ops, porcupine.Operation{
			ClientId: policyClient,
			Input:    step{kind: stepAssign, maybe: m.ack == math.MaxInt64, latest: latest(m.ack), tier: slices.Index(tiers, m.tier), idx: m.idx},
			Call:     m.from, Return: m.ack,
			Metadata: fmt.Sprintf("tier assignment %d: key to tier %q", m.idx, m.tier),
		})
	}
	return ops
}

// tighten narrows the intervals of stamped ops (decisions and reads) to
// what their stamps force, which leaves the same linearizations and spares
// porcupine most of the search: stamps never go back along a linearization,
// so a decision comes after every op with a smaller stamp (its linearization
// point is no earlier than theirs, hence no earlier than their invokes) and
// a decision or read comes before every decision with a larger stamp (no
// later than their completions). If some op's interval becomes empty, the
// ops y and z are a contradiction: z completed before y was invoked, yet
// must come after it; ok is false.
func tighten(ops []porcupine.Operation) (y, z int, ok bool) {
	var idx []int
	for i, op := range ops {
		if in := op.Input.(step); in.kind == stepRead || (in.kind == stepAllow && !in.info) {
			idx = append(idx, i)
		}
	}
	stamp := func(i int) int64 { return ops[i].Input.(step).stamp }
	decision := func(i int) bool { return ops[i].Input.(step).kind == stepAllow }
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(stamp(a), stamp(b)) })
	calls := make(map[int]int, len(idx)) // op -> op whose invoke bounds its call
	rets := make(map[int]int, len(idx))  // op -> op whose completion bounds its return
	maxCall, by := int64(math.MinInt64), -1
	for g := 0; g < len(idx); {
		e := g
		for e < len(idx) && stamp(idx[e]) == stamp(idx[g]) {
			e++
		}
		for _, i := range idx[g:e] {
			if decision(i) && by >= 0 && maxCall > ops[i].Call {
				calls[i] = by
			}
		}
		for _, i := range idx[g:e] {
			if ops[i].Call > maxCall {
				maxCall, by = ops[i].Call, i
			}
		}
		g = e
	}
	minRet, by := int64(math.MaxInt64), -1
	for e := len(idx); e > 0; {
		g := e - 1
		for g > 0 && stamp(idx[g-1]) == stamp(idx[e-1]) {
			g--
		}
		for _, i := range idx[g:e] {
			if by >= 0 && minRet < ops[i].Return {
				rets[i] = by
			}
		}
		for _, i := range idx[g:e] {
			if decision(i) && ops[i].Return < minRet {
				minRet, by = ops[i].Return, i
			}
		}
		e = g
	}
	for _, i := range idx {
		y, z := i, i
		if j, ok := calls[i]; ok {
			y = j
		}
		if j, ok := rets[i]; ok {
			z = j
		}
		if ops[y].Call > ops[z].Return {
			return y, z, false
		}
	}
	for i, j := range calls {
		ops[i].Call = ops[j].Call
	}
	for i, j := range rets {
		ops[i].Return = ops[j].Return
	}
	return 0, 0, true
}

// explain describes where the search got stuck: the longest linearizable
// prefix it found, the state it leaves, and the first operation (by return
// time) it could not place.
func explain(c clock, h history.History, model porcupine.Model, ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	partials := info.PartialLinearizationsOperations()
	if len(partials) == 0 || len(partials[0]) == 0 {
		return fmt.Sprintf("no operation can be linearized first (%d ops)", len(ops))
	}
	longest := slices.MaxFunc(partials[0], func(a, b []porcupine.Operation) int { return cmp.Compare(len(a), len(b)) })
	in := map[int]bool{}
	state := model.Init()
	for _, op := range longest {
		in[opID(op.Input.(step))] = true
		_, state = model.Step(state, op.Input, op.Output)
	}
	var stuck *porcupine.Operation
	for i := range ops {
		s := ops[i].Input.(step)
		if in[opID(s)] {
			continue
		}
		if stuck == nil || ops[i].Return < stuck.Return {
			stuck = &ops[i]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "longest linearizable prefix has %d of %d ops and leaves the balance %s", len(longest), len(ops), model.DescribeState(state))
	if stuck != nil {
		s := stuck.Input.(step)
		switch s.kind {
		case stepPolicy:
			fmt.Fprintf(&b, "; cannot then place policy change %d", s.idx)
		case stepAssign:
			fmt.Fprintf(&b, "; cannot then place tier assignment %d", s.idx)
		default:
			fmt.Fprintf(&b, "; cannot then place %s", describe(c, h.Ops[s.idx]))
		}
	}
	return b.String()
}

// opID identifies a step among a key's operations.
func opID(s step) int {
	switch s.kind {
	case stepPolicy:
		return 3*s.idx + 1
	case stepAssign:
		return 3*s.idx + 2
	}
	return 3 * s.idx
}

func boolBit(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Visualization is porcupine's view of the keys that failed (or could not
// be decided): their histories and the longest partial linearizations.
type Visualization struct {
	keys   []string
	models []porcupine.Model
	infos  []porcupine.LinearizationInfo
}

func (v *Visualization) add(key string, m porcupine.Model, info porcupine.LinearizationInfo) {
	v.keys = append(v.keys, key)
	v.models = append(v.models, m)
	v.infos = append(v.infos, info)
}

// Annotate marks the nemesis intervals on every key's timeline, so that a
// failing key can be read against the faults that were active.
func (v *Visualization) Annotate(intervals []history.Interval) {
	var anns []porcupine.Annotation
	for _, iv := range intervals {
		var details []string
		for k, val := range iv.Detail {
			details = append(details, k+"="+val)
		}
		slices.Sort(details)
		anns = append(anns, porcupine.Annotation{
			Tag: "nemesis", Start: iv.Start, End: iv.Stop, Description: iv.Name,
			Details: strings.Join(details, " "), BackgroundColor: "#f4c7c3",
		})
	}
	for i := range v.infos {
		v.infos[i].AddAnnotations(anns)
	}
}

// Keys returns the keys shown, in key order.
func (v *Visualization) Keys() []string { return slices.Clone(v.keys) }

// WriteHTML writes one porcupine HTML file per key into dir (created if
// needed), named linearizability-NNN-<key>.html, and returns their paths.
func (v *Visualization) WriteHTML(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for i, key := range v.keys {
		path := filepath.Join(dir, fmt.Sprintf("linearizability-%03d-%s.html", i, safeName(key)))
		if err := porcupine.VisualizePath(v.models[i], v.infos[i], path); err != nil {
			return paths, fmt.Errorf("checker: visualizing key %q: %w", key, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// safeName keeps a key usable in a file name.
func safeName(key string) string {
	b := []byte(key)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
