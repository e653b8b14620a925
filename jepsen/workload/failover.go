package workload

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/quorate/quorate/internal/grouphash"
	"github.com/quorate/quorate/jepsen/history"
)

// Quarantine bounds: a node that just failed an attempt is skipped for
// quarantineBase, twice as long after each further failure in a row, at
// most quarantineMax; then one attempt (a probe) may go to it again, and an
// answer ends its quarantine.
const (
	quarantineBase = 250 * time.Millisecond
	quarantineMax  = 2 * time.Second
)

// router is the workload's failing-over caller, shared by every worker of
// a Run the way one client library is shared by a process's goroutines. It
// spreads attempts over every node at random, but skips for a short,
// bounded while a node that just failed one: a connection refused or
// broken, a client-side timeout, or a 503 that says the node could not get
// a decision (unavailable, timeout, not_ready, outcome_unknown,
// shutting_down). A node that
// cannot reach its group's leader fails every group the same way, so a
// transport failure or shutting_down puts the whole node aside; an
// unavailable or timeout answer may be one group's trouble (a group whose
// leader was just killed is leaderless on every node), so with
// Config.Groups set it puts aside only that node for that group. When its
// quarantine has run out, one attempt goes to the node as a probe while the
// others still skip it, so a recovered node is noticed at once and a dead
// one costs one attempt per period.
//
// It chooses where attempts go and nothing else: every attempt is still
// sent, recorded and classified as before.
type router struct {
	n      int
	groups int
	now    func() time.Time
	mu     sync.Mutex
	// quarantine entries: node-wide (group -1) and per node and group.
	q map[qkey]*qstate
}

type qkey struct{ node, group int }

type qstate struct {
	until   time.Time // skipped until then
	strikes int       // failures in a row: the quarantine doubles with each
	probing bool      // a probe is in flight: the others still skip it
}

func newRouter(cfg Config) *router {
	return &router{n: len(cfg.Targets), groups: cfg.Groups, now: cfg.Now, q: map[qkey]*qstate{}}
}

// groupOf is the data group of key as the API documents it (GET
// /v1/routes: "fnv1a64-mod"), or -1 when the number of groups is unknown.
func (r *router) groupOf(key string) int {
	if r.groups <= 0 {
		return -1
	}
	return grouphash.Of(key, r.groups)
}

// Node states for pick, best first.
const (
	stateHealthy = iota
	stateGroupQuarantined
	stateNodeQuarantined
)

// state says how node stands for group at now, and whether an attempt
// sent there now would be its probe (its quarantine ran out, nobody is
// probing it): a probe counts as healthy.
func (r *router) state(node, group int, now time.Time) (st int, probe []*qstate) {
	keys := []qkey{{node, -1}}
	if group != -1 {
		keys = append(keys, qkey{node, group})
	}
	for _, k := range keys {
		e := r.q[k]
		if e == nil {
			continue
		}
		switch {
		case now.Before(e.until) || e.probing:
			if k.group == -1 {
				return stateNodeQuarantined, nil
			}
			st = stateGroupQuarantined
		default:
			probe = append(probe, e)
		}
	}
	if st != stateHealthy {
		return st, nil
	}
	return st, probe
}

// pick chooses the node for the next attempt on key's group: at random
// among those not in tried that are in the best state (healthy or due for
// a probe, else quarantined for the group only, else quarantined), and
// marks a probe as in flight. It returns -1 if every node is in tried.
func (r *router) pick(rng *rand.Rand, group int, tried []int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	best, chosen := stateNodeQuarantined+1, -1
	var chosenProbe []*qstate
	seen := 0
	for node := range r.n {
		if containsInt(tried, node) {
			continue
		}
		st, probe := r.state(node, group, now)
		switch {
		case st < best:
			best, seen = st, 0
			fallthrough
		case st == best:
			// Reservoir sampling: each node of the best state equally likely.
			seen++
			if rng.IntN(seen) == 0 {
				chosen, chosenProbe = node, probe
			}
		}
	}
	for _, e := range chosenProbe {
		e.probing = true
	}
	return chosen
}

// report records what an attempt sent to node for group showed about it.
func (r *router) report(node, group int, a history.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := qkey{node, -1}
	nodeProbed := false
	for _, kk := range []qkey{k, {node, group}} {
		if e := r.q[kk]; e != nil {
			nodeProbed = nodeProbed || (kk.group == -1 && e.probing)
			e.probing = false
		}
	}
	switch nodeFailure(a) {
	case failedGroup:
		if group != -1 {
			k.group = group
		}
	case failedNode:
	default:
		// The node answered: whatever it said, it is reachable and
		// deciding (a 4xx refusal or overloaded is not a reason to avoid
		// it), so its quarantines end.
		delete(r.q, k)
		if group != -1 {
			delete(r.q, qkey{node, group})
		}
		return
	}
	e := r.q[k]
	if e == nil {
		e = &qstate{}
		r.q[k] = e
	}
	e.strikes++
	e.until = r.now().Add(min(quarantineBase<<min(e.strikes-1, 8), quarantineMax))
	if k.group != -1 && nodeProbed {
		// A probe of the whole node that failed for one group only showed
		// the node reachable.
		delete(r.q, qkey{node, -1})
	}
}

// What an attempt's failure says about its node.
const (
	failedNot   = iota // it answered (a decision, a refusal, or an ambiguous answer)
	failedNode         // unreachable, broken, or stopping: every group
	failedGroup        // could not get a decision for this key's group
)

func nodeFailure(a history.Op) int {
	switch {
	case a.Outcome == history.OutcomeOK:
		return failedNot
	case a.Status == 0:
		// No answer at all: dial, send, timeout, read.
		return failedNode
	case a.Status == http.StatusServiceUnavailable:
		switch a.Error {
		case "shutting_down":
			return failedNode
		case "unavailable", "timeout", "not_ready", "outcome_unknown":
			// outcome_unknown: the node proposed the decision but could
			// not learn in time whether it was committed (a leader cut off
			// from its followers answers so at the deadline); the retry
			// with the same request id is safe anywhere.
			return failedGroup
		}
	case a.Status >= 500:
		return failedNode
	}
	return failedNot
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
