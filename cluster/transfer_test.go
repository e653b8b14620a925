package cluster

import (
	"bytes"
	"math/rand/v2"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// neverRefillingCluster starts three nodes whose default policy never
// refills (every admission of transferClient leaves a balance of its own) and
// returns them with transferClient's group.
func neverRefillingCluster(t *testing.T) (*testCluster, int) {
	t.Helper()
	tc := newTestCluster(t, 3)
	_, err := tc.nodes[0].ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: 1_000_000, Rate: 0}})
	require.NoError(t, err)
	return tc, GroupOf(transferClient, tc.groups)
}

// transferClient is the one client of the transfer tests.
const transferClient = "acct"

// A leader that hands its group to a node that has just restarted and is
// still catching up must not leave its last decisions behind: on a bucket
// that never refills, every admission leaves a balance no other admission
// left. The fault suite saw the opposite once (jepsen/findings/
// 2026-12-07-crash-756653: a new leader, just back and hundreds of entries
// behind, decided from a state without its predecessor's last decisions);
// this drives the same sequence in one process, round after round: stop a
// follower, decide while it is down, start it, and transfer the group to
// it at once.
func TestTransferToReturningNodeKeepsEveryDecision(t *testing.T) {
	tc, gi := neverRefillingCluster(t)

	var (
		mu        sync.RWMutex // guards tc.nodes against the rounds below
		answersMu sync.Mutex
		answers   = map[int64]int{} // remaining balance -> admissions that left it
		decided   atomic.Int64
	)
	stopLoad := runLoad(t, 4, 200_000, func(w, i int) {
		mu.RLock()
		var live []*Node
		for _, n := range tc.nodes {
			if n != nil {
				live = append(live, n)
			}
		}
		mu.RUnlock()
		n := live[rand.IntN(len(live))]
		ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: transferClient, Cost: 1}})
		if err != nil || !ds[0].Allowed {
			return // refused or unknown: nothing to check
		}
		answersMu.Lock()
		answers[ds[0].RemainingTokens()]++
		answersMu.Unlock()
		decided.Add(1)
	})
	waitDecided := func(more int64) {
		t.Helper()
		from := decided.Load()
		if !assert.Eventually(t, func() bool { return decided.Load() >= from+more }, 30*time.Second, time.Millisecond) { // a bound, not a wait
			for i, n := range tc.nodes {
				if n != nil {
					g := n.groups[gi]
					st := g.Raft.Stats()
					berr := g.Raft.Barrier(100 * time.Millisecond).Error()
					t.Logf("n%d: barrier now: %v", i+1, berr)
					t.Logf("n%d: serving %t state %s term %s last %s commit %s applied %s leader %v", i+1, g.Serving(), st["state"], st["term"], st["last_log_index"], st["commit_index"], st["applied_index"], g.Raft.Leader())
				}
			}
			var buf bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
			for _, st := range strings.Split(buf.String(), "\n\n") {
				if strings.Contains(st, "watchLeadership") {
					t.Log(st)
				}
			}
			t.Fatalf("the cluster stopped deciding at %d", decided.Load())
		}
	}
	waitDecided(200)

	for round := range 6 {
		leader := tc.leaderOfClient(transferClient)
		require.GreaterOrEqual(t, leader, 0, "round %d: group %d has no leader", round, gi)
		back := (leader + 1 + round%2) % 3

		mu.Lock()
		n := tc.nodes[back]
		tc.nodes[back] = nil
		mu.Unlock()
		require.NoError(t, n.Close())
		waitDecided(2_000) // the returning node will be this far behind

		mu.Lock()
		tc.start(back)
		mu.Unlock()
		// One transfer per round, whatever its outcome (the placer may move
		// the group on at once). Retrying a refused transfer every few
		// milliseconds wedges hashicorp/raft v1.8.0's leader in "leadership
		// transfer in progress" for good (see the README's fault-suite
		// results); that is a separate, open problem.
		g := tc.nodes[leader].groups[gi]
		id, addr := raft.ServerID(tc.nodes[back].opts.NodeID), raft.ServerAddress(tc.raft[back])
		_ = g.Raft.LeadershipTransferToServer(id, addr).Error()
		waitDecided(500)
	}
	stopLoad()

	answersMu.Lock()
	defer answersMu.Unlock()
	twice := 0
	for remaining, k := range answers {
		if k > 1 {
			twice++
			t.Logf("balance %d left by %d admissions", remaining, k)
		}
	}
	t.Logf("%d admissions checked", decided.Load())
	assert.Zero(t, twice, "admissions that did not see an earlier acknowledged one")
}

// The placer moves a group's leadership only to a follower the group found
// caught up (raftgroup.Group.CaughtUp): a node that has just restarted
// answers heartbeats at once while its log is still far behind, and a
// transfer to it holds every proposal up while it catches up (and can wedge
// hashicorp/raft v1.8.0's leader when the target's appends are failing). So
// a stopped follower is not caught up, and whenever the leader says a
// returning one is, its log holds all but at most one append of the
// leader's.
func TestCaughtUpNeedsTheFollowersLog(t *testing.T) {
	tc, gi := neverRefillingCluster(t)
	var (
		mu      sync.RWMutex // guards tc.nodes against the stop and start below
		decided atomic.Int64
	)
	stopLoad := runLoad(t, 2, 200_000, func(w, i int) {
		mu.RLock()
		n := tc.nodes[i%3]
		mu.RUnlock()
		if n == nil {
			return
		}
		if ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: transferClient, Cost: 1}}); err == nil && ds[0].Allowed {
			decided.Add(1)
		}
	})
	defer stopLoad()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		require.Eventually(t, cond, 30*time.Second, time.Millisecond, what) // a bound, not a wait
	}
	waitFor("decisions", func() bool { return decided.Load() >= 200 })

	leader := tc.leaderOfClient(transferClient)
	require.GreaterOrEqual(t, leader, 0)
	back := (leader + 1) % 3
	g := tc.nodes[leader].groups[gi]
	addr := tc.raft[back]
	waitFor("the follower caught up before it stops", func() bool { return g.CaughtUp(addr) })

	mu.Lock()
	n := tc.nodes[back]
	tc.nodes[back] = nil
	mu.Unlock()
	require.NoError(t, n.Close())
	from := decided.Load()
	waitFor("decisions while the follower is down", func() bool { return decided.Load() >= from+1_000 })
	assert.False(t, g.CaughtUp(addr), "a stopped follower is not caught up")

	mu.Lock()
	tc.start(back)
	follower := tc.nodes[back].groups[gi]
	mu.Unlock()
	checks := 0
	waitFor("the returning follower caught up", func() bool {
		last := g.Raft.LastIndex()
		if !g.CaughtUp(addr) {
			return false
		}
		checks++
		assert.GreaterOrEqual(t, follower.Raft.LastIndex()+256, last, "caught up with a log this far behind")
		return true
	})
	assert.Equal(t, 1, checks)
}
