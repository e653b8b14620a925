package workload

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/jepsen/history"
)

// fakeClock is a settable clock for the router.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testRouter(nodes, groups int) (*router, *fakeClock) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	return newRouter(Config{Targets: make([]string, nodes), Groups: groups, Now: clk.now}), clk
}

var (
	okAttempt   = history.Op{Outcome: history.OutcomeOK, Status: 200}
	dialFailure = history.Op{Outcome: history.OutcomeFail, Error: "dial"}
	unavailable = history.Op{Outcome: history.OutcomeFail, Status: 503, Error: "unavailable"}
)

// picks counts where n picks for group go, with nothing tried yet.
func picks(r *router, rng *rand.Rand, group, n int) map[int]int {
	out := map[int]int{}
	for range n {
		out[r.pick(rng, group, nil)]++
	}
	return out
}

func TestNodeFailure(t *testing.T) {
	for _, tc := range []struct {
		op   history.Op
		want int
	}{
		{okAttempt, failedNot},
		{dialFailure, failedNode},
		{history.Op{Outcome: history.OutcomeInfo, Error: "timeout"}, failedNode},
		{history.Op{Outcome: history.OutcomeInfo, Error: "send"}, failedNode},
		{history.Op{Outcome: history.OutcomeFail, Status: 503, Error: "shutting_down"}, failedNode},
		{unavailable, failedGroup},
		{history.Op{Outcome: history.OutcomeFail, Status: 503, Error: "timeout"}, failedGroup},
		{history.Op{Outcome: history.OutcomeFail, Status: 503, Error: "overloaded"}, failedNot},
		{history.Op{Outcome: history.OutcomeInfo, Status: 503, Error: "outcome_unknown"}, failedGroup},
		{history.Op{Outcome: history.OutcomeFail, Status: 400, Error: "invalid_cost"}, failedNot},
		{history.Op{Outcome: history.OutcomeInfo, Status: 500, Error: "internal"}, failedNode},
	} {
		assert.Equal(t, tc.want, nodeFailure(tc.op), "%+v", tc.op)
	}
}

func TestRouterSkipsAFailedNodeThenProbesIt(t *testing.T) {
	r, clk := testRouter(3, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	got := picks(r, rng, -1, 300)
	assert.Len(t, got, 3, "load over every node")

	r.report(0, -1, dialFailure)
	got = picks(r, rng, -1, 300)
	assert.Zero(t, got[0], "node 0 is skipped while quarantined")
	assert.Positive(t, got[1])
	assert.Positive(t, got[2])

	clk.add(quarantineBase)
	got = picks(r, rng, -1, 300)
	assert.Equal(t, 1, got[0], "one probe once the quarantine ran out, and only one while it is in flight")
	r.report(0, -1, dialFailure)
	clk.add(quarantineBase)
	assert.Zero(t, picks(r, rng, -1, 300)[0], "a second failure doubles the quarantine")
	clk.add(quarantineBase)
	assert.Equal(t, 1, picks(r, rng, -1, 300)[0], "the next probe")
	r.report(0, -1, okAttempt)
	got = picks(r, rng, -1, 300)
	assert.Greater(t, got[0], 50, "an answered probe puts the node back")

	// Failures in a row never keep a node aside longer than quarantineMax.
	for range 20 {
		r.report(1, -1, dialFailure)
	}
	clk.add(quarantineMax)
	assert.Equal(t, 1, picks(r, rng, -1, 10)[1])
}

func TestRouterTriesEveryNodeThenFallsBack(t *testing.T) {
	r, _ := testRouter(3, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	r.report(0, -1, dialFailure)
	r.report(1, -1, dialFailure)
	r.report(2, -1, dialFailure)
	n := r.pick(rng, -1, nil)
	assert.GreaterOrEqual(t, n, 0, "every node quarantined: still some node")
	tried := []int{}
	for range 3 {
		n := r.pick(rng, -1, tried)
		require.NotContains(t, tried, n)
		tried = append(tried, n)
	}
	assert.Equal(t, -1, r.pick(rng, -1, tried), "every node tried")
}

func TestRouterUnavailableIsPerGroup(t *testing.T) {
	r, clk := testRouter(3, 4)
	rng := rand.New(rand.NewPCG(1, 2))
	r.report(0, 2, unavailable)
	assert.Zero(t, picks(r, rng, 2, 300)[0], "skipped for the group that failed")
	assert.Greater(t, picks(r, rng, 1, 300)[0], 50, "not for the others")

	// Every node unavailable for group 2 (its leader was killed): the
	// caller still gets a node, preferring one not put aside altogether.
	r.report(1, 2, unavailable)
	r.report(2, -1, dialFailure)
	r.report(0, 2, unavailable)
	got := picks(r, rng, 2, 300)
	assert.Zero(t, got[2], "a node that refused connections is the last resort")
	assert.Positive(t, got[0])
	assert.Positive(t, got[1])

	clk.add(quarantineBase)
	n := r.pick(rng, 2, []int{0})
	assert.Equal(t, 1, n, "node 1's group quarantine ran out: probe it")
	r.report(1, 2, okAttempt)
	assert.Greater(t, picks(r, rng, 2, 300)[1], 200)
}

func TestGroupOfMatchesTheCluster(t *testing.T) {
	r, _ := testRouter(3, 4)
	for _, k := range []string{"", "hot-0", "cold-17", "acct-3", "mover-2"} {
		assert.Equal(t, cluster.GroupOf(k, 4), r.groupOf(k), k)
	}
	r.groups = 0
	assert.Equal(t, -1, r.groupOf("hot-0"))
}

// TestRunFailsOverFromADeadNode: one of two targets refuses connections.
// Every operation is still decided, every attempt (the refused ones too)
// is recorded, a retry goes to the other node at once, and the dead node
// gets only its probes.
func TestRunFailsOverFromADeadNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	live := startNode(t)
	cfg := config(live)
	cfg.Targets = []string{dead, live}
	cfg.MaxOps = 300
	ops := Run(context.Background(), cfg)
	decided := map[string]bool{}
	toDead := 0
	for _, op := range ops {
		if op.Node == dead {
			toDead++
			assert.Equal(t, history.OutcomeFail, op.Outcome)
			assert.Equal(t, "dial", op.Error)
			continue
		}
		assert.Equal(t, history.OutcomeOK, op.Outcome)
		decided[op.RequestID] = true
	}
	assert.Len(t, decided, 300, "every operation decided")
	assert.Equal(t, 300+toDead, len(ops), "every attempt recorded")
	assert.Positive(t, toDead)
	assert.Less(t, toDead, 30, "the dead node gets probes, not a share of the load")
	for _, op := range ops {
		if op.Node == dead {
			// Its retry went to the live node at once: no backoff.
			for _, next := range ops {
				if next.RequestID == op.RequestID && next.Attempt == op.Attempt+1 {
					assert.Less(t, next.Invoke-op.Complete, int64(10*time.Millisecond))
				}
			}
		}
	}
}

// TestRunSkipsANodeThatHoldsRequests: a node that waits out the caller's
// deadline and answers 503 unavailable (an isolated node) costs a few
// slow attempts, not a third of them.
func TestRunSkipsANodeThatHoldsRequests(t *testing.T) {
	isolated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"no leader"}}`))
	}))
	t.Cleanup(isolated.Close)
	live := startNode(t)
	cfg := config(live)
	cfg.Targets, cfg.Groups, cfg.MaxOps = []string{live, isolated.URL, live}, 2, 400
	ops := Run(context.Background(), cfg)
	held := 0
	for _, op := range ops {
		if op.Node == isolated.URL {
			held++
			assert.Equal(t, "unavailable", op.Error)
		}
	}
	assert.Positive(t, held)
	assert.Less(t, float64(held)/float64(len(ops)), 0.1, "%d of %d attempts held", held, len(ops))
}
