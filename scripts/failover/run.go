package main

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/internal/grouphash"
)

// runResult is what one run (runOnce) measured; the JSON report lists
// them.
type runResult struct {
	Run       int    `json:"run"`
	Client    string `json:"client"`
	Group     string `json:"group"`
	Killed    string `json:"killed"`
	KilledPID int    `json:"killed_pid"`
	OldTerm   uint64 `json:"old_term"`
	Via       string `json:"via"`
	NewLeader string `json:"new_leader,omitempty"`
	NewTerm   uint64 `json:"new_term,omitempty"`
	// KillToDecisionMs is from the kill to the answer of the first
	// decision made by the new leader.
	KillToDecisionMs float64 `json:"kill_to_first_decision_ms"`
	// KillToSentMs is when, after the kill, that request was sent.
	KillToSentMs float64 `json:"kill_to_first_decision_sent_ms"`
	// UnavailableMs is from the last answer decided by the old leader to
	// the first decided by the new one.
	UnavailableMs float64 `json:"unavailable_ms"`
	Probes        int     `json:"probes"`
	FailedProbes  int     `json:"failed_probes"`
	FirstFailure  string  `json:"first_failure,omitempty"`
	// LastFailedSentMs is when, after the kill, the last failed probe was
	// sent; Failures counts the failures after the kill by kind.
	LastFailedSentMs float64                 `json:"last_failed_sent_ms,omitempty"`
	Failures         map[string]*failureKind `json:"failures,omitempty"`
	Error            string                  `json:"error,omitempty"`

	restartNeeded bool
}

// failureKind summarizes the failed probes of one kind (HTTP status and
// error code, or "transport"): how many, and how long they took.
type failureKind struct {
	Count int     `json:"count"`
	MinMs float64 `json:"min_ms"`
	MaxMs float64 `json:"max_ms"`
}

type probeResult struct {
	sent, done time.Time
	ok         bool
	stamp      int64
	kind       string // of a failure
	err        string
}

// runOnce kills the leader of the client's group once and measures.
func (t *tool) runOnce(i int) (runResult, error) {
	r := runResult{Run: i, Client: t.c.client}
	views := t.views(t.nodes)
	if len(views) == 0 {
		return r, errors.New("no node answers GET /v1/cluster")
	}
	groups := 0
	for _, st := range views {
		groups = max(groups, st.DataGroups())
	}
	if groups == 0 {
		return r, errors.New("no data groups in GET /v1/cluster")
	}
	r.Group = strconv.Itoa(grouphash.Of(t.c.client, groups))
	leader, term, ok := leaderOf(views, r.Group)
	if !ok {
		return r, fmt.Errorf("group %s has no leader the nodes agree on", r.Group)
	}
	r.Killed, r.OldTerm = leader, term
	victim, ok := t.byID(leader)
	if !ok {
		return r, fmt.Errorf("group %s is led by %q, which is not a node in %s", r.Group, leader, t.c.dir)
	}
	// Probe through a survivor, a different one each run when there are
	// several.
	var survivors []node
	for _, n := range t.nodes {
		if n.id != victim.id {
			if _, up := views[n.id]; up {
				survivors = append(survivors, n)
			}
		}
	}
	if len(survivors) == 0 {
		return r, errors.New("no surviving node answers")
	}
	via := survivors[(i-1)%len(survivors)]
	r.Via = via.id
	pid, err := checkPID(victim)
	if err != nil {
		return r, err
	}
	r.KilledPID = pid

	api := client.NewNode(via.base, t.probe, client.WithToken(t.c.token))
	p := newProber(t.ctx, api, t.c.client, t.c.interval, t.c.timeout+2*time.Second)
	p.start()
	// Warm up: the probe must be getting answers before the kill, or there
	// is nothing to compare with.
	if !p.waitSuccesses(5, 3*time.Second) {
		p.stop()
		return r, fmt.Errorf("probes through %s get no answers before the kill: %s", via.id, p.firstFailure())
	}
	if t.ctx.Err() != nil {
		p.stop()
		return r, t.ctx.Err()
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		p.stop()
		return r, fmt.Errorf("kill -9 %d (%s): %w", pid, victim.id, err)
	}
	tKill := time.Now()
	r.restartNeeded = true
	t.logf("run %d: kill -9 %s (pid %d), leader of group %s (term %d); probing via %s", i, victim.id, pid, r.Group, term, via.id)
	found := p.waitNewDecision(tKill, t.c.timeout)
	p.stop()
	if !waitGone(pid, 2*time.Second) {
		t.logf("run %d: pid %d still present 2 s after SIGKILL", i, pid)
	}

	probes := p.results()
	r.Probes = len(probes)
	var first, lastOld *probeResult
	for k := range probes {
		pr := &probes[k]
		if !pr.ok {
			r.FailedProbes++
			if !pr.sent.After(tKill) {
				continue
			}
			if r.FirstFailure == "" {
				r.FirstFailure = pr.err
			}
			r.LastFailedSentMs = max(r.LastFailedSentMs, ms(pr.sent.Sub(tKill)))
			if r.Failures == nil {
				r.Failures = map[string]*failureKind{}
			}
			d := ms(pr.done.Sub(pr.sent))
			if f := r.Failures[pr.kind]; f == nil {
				r.Failures[pr.kind] = &failureKind{Count: 1, MinMs: d, MaxMs: d}
			} else {
				f.Count++
				f.MinMs, f.MaxMs = min(f.MinMs, d), max(f.MaxMs, d)
			}
			continue
		}
		if pr.stamp <= tKill.UnixNano() {
			if lastOld == nil || pr.done.After(lastOld.done) {
				lastOld = pr
			}
			continue
		}
		if pr.sent.After(tKill) && (first == nil || pr.done.Before(first.done)) {
			first = pr
		}
	}
	if t.ctx.Err() != nil && !found {
		r.Error = "interrupted"
		return r, nil
	}
	if !found || first == nil {
		r.Error = fmt.Sprintf("no decision within %s after the kill (%d probes, %d failed; first failure: %s)", t.c.timeout, r.Probes, r.FailedProbes, r.FirstFailure)
		return r, nil
	}
	r.KillToDecisionMs = ms(first.done.Sub(tKill))
	r.KillToSentMs = ms(first.sent.Sub(tKill))
	if lastOld != nil {
		r.UnavailableMs = ms(first.done.Sub(lastOld.done))
	}

	// After the fact: the group must now be led by another node, in a
	// later term.
	deadline := time.Now().Add(5 * time.Second)
	for {
		vs := t.views(survivors)
		if l, term, ok := leaderOf(vs, r.Group); ok && l != victim.id {
			r.NewLeader, r.NewTerm = l, term
			break
		}
		if time.Now().After(deadline) {
			r.Error = fmt.Sprintf("a decision came back after the kill, but the survivors do not report a new leader of group %s", r.Group)
			return r, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.NewTerm <= r.OldTerm {
		r.Error = fmt.Sprintf("group %s: new leader %s in term %d, not after the killed leader's term %d", r.Group, r.NewLeader, r.NewTerm, r.OldTerm)
	}
	return r, nil
}
