package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/origin"
	"github.com/quorate/quorate/fsm"
)

// An answer lost after the entry was applied: the node's retry under the
// same origins gets the first decision back, as this call's own, and the
// bucket pays once. A retry of a request never applied is decided then.
func TestResolverLearnsLostOutcomes(t *testing.T) {
	tc := newTestCluster(t, 1)
	n := tc.nodes[0]
	_, err := n.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: 10, Rate: 0}})
	require.NoError(t, err)
	balance := func(client string) int64 {
		v, err := n.Client(ctx(t), client)
		require.NoError(t, err)
		return v.Decision.RemainingTokens()
	}
	lost := fmt.Errorf("%w: test: the answer was lost", ErrOutcomeUnknown)

	t.Run("applied, answer lost", func(t *testing.T) {
		g := n.groupFor("a")
		reqs := n.origins.With([]fsm.AllowRequest{{Client: "a", Cost: 2}, {Client: "a", Cost: 1}})
		first, err := g.Batch.Submit(ctx(t), reqs) // applied; its answer never reaches the caller
		require.NoError(t, err)
		r := origin.NewResolver(ctx(t), reqs)
		require.ErrorIs(t, r.Check(lost), errs.ErrNotLeader, "an unknown outcome is retried")
		ds, err := n.decide(ctx(t), g, r)
		require.NoError(t, err)
		require.Len(t, ds, 2)
		for i := range ds {
			assert.False(t, ds[i].Duplicate, "the decision is this call's own")
			assert.Equal(t, first[i].Remaining, ds[i].Remaining)
			assert.True(t, ds[i].Allowed)
		}
		assert.Equal(t, int64(7), balance("a"), "paid once")
	})
	t.Run("never applied", func(t *testing.T) {
		g := n.groupFor("b")
		r := origin.NewResolver(ctx(t), n.origins.With([]fsm.AllowRequest{{Client: "b", Cost: 4}}))
		require.ErrorIs(t, r.Check(lost), errs.ErrNotLeader)
		ds, err := n.decide(ctx(t), g, r)
		require.NoError(t, err)
		assert.False(t, ds[0].Duplicate)
		assert.Equal(t, int64(6), balance("b"))
	})
	t.Run("a request id decided by an earlier call stays a duplicate", func(t *testing.T) {
		_, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "c", Cost: 1, RequestID: "x"}})
		require.NoError(t, err)
		g := n.groupFor("c")
		r := origin.NewResolver(ctx(t), n.origins.With([]fsm.AllowRequest{{Client: "c", Cost: 1, RequestID: "x"}}))
		require.ErrorIs(t, r.Check(lost), errs.ErrNotLeader)
		ds, err := n.decide(ctx(t), g, r)
		require.NoError(t, err)
		assert.True(t, ds[0].Duplicate, "the caller's own retry of an id it used before")
		assert.Equal(t, int64(9), balance("c"))
	})
}

// Leaders stopped gracefully (like SIGTERM) under load without request ids:
// every token taken is accounted for by an acknowledged admission or an
// answer that said the outcome was unknown, never by a second decision of
// one request.
func TestClusterGracefulStopsNeverSpendTwice(t *testing.T) {
	tc := newTestCluster(t, 3)
	const capacity = 100_000
	_, err := tc.nodes[0].ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "fixed", Policy: bucket.Policy{Capacity: capacity, Rate: 0}})
	require.NoError(t, err)
	clients := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	for _, c := range clients {
		require.NoError(t, tc.nodes[0].SetClientTier(ctx(t), c, "fixed", "ops"))
	}

	var acked, unknown atomic.Int64
	var mu sync.Mutex
	live := map[int]bool{0: true, 1: true, 2: true}
	pick := func(w, i int) *Node {
		mu.Lock()
		defer mu.Unlock()
		for k := range 3 {
			if j := (w + i + k) % 3; live[j] {
				return tc.nodes[j]
			}
		}
		return nil
	}
	stopLoad := runLoad(t, 6, 20_000, func(w, i int) {
		n := pick(w, i)
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ds, err := n.Allow(c, []fsm.AllowRequest{{Client: clients[(w+i)%len(clients)], Cost: 1}})
		cancel()
		switch {
		case err == nil && ds[0].Allowed:
			acked.Add(1)
		case errors.Is(err, ErrOutcomeUnknown):
			unknown.Add(1)
		}
	})
	// Stop each node in turn while it leads groups, and bring it back.
	for round := range 3 {
		victim := round % 3
		before := acked.Load()
		require.Eventually(t, func() bool { return acked.Load() >= before+100 }, 10*time.Second, time.Millisecond)
		mu.Lock()
		live[victim] = false
		mu.Unlock()
		tc.stop(victim)
		tc.start(victim)
		mu.Lock()
		live[victim] = true
		mu.Unlock()
		tc.waitStable(3)
	}
	stopLoad()

	var consumed int64
	for _, c := range clients {
		v, err := tc.nodes[0].Client(ctx(t), c)
		require.NoError(t, err)
		consumed += capacity - v.Decision.RemainingTokens()
	}
	t.Logf("consumed %d, acknowledged %d, unknown %d", consumed, acked.Load(), unknown.Load())
	assert.GreaterOrEqual(t, consumed, acked.Load(), "an acknowledged admission was lost")
	assert.LessOrEqual(t, consumed, acked.Load()+unknown.Load(), "a token was spent twice")
}

// A node that stops while it retries to learn an unknown outcome answers
// that the outcome is unknown, wrapping why it stopped trying. The fault
// suite's membership mix caught the HTTP layer answering such an error
// shutting_down, which says nothing was decided; httpapi's
// TestServiceErrorMapping holds it to outcome_unknown.
func TestAStopWhileResolvingLeavesTheOutcomeUnknown(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual())
	g := n.groupFor("a")
	r := origin.NewResolver(ctx(t), n.origins.With([]fsm.AllowRequest{{Client: "a", Cost: 1}}))
	require.ErrorIs(t, r.Check(fmt.Errorf("%w: test: the answer was lost", ErrOutcomeUnknown)), errs.ErrNotLeader)
	require.NoError(t, n.Close())
	_, err := n.decide(ctx(t), g, r)
	assert.ErrorIs(t, err, ErrOutcomeUnknown)
	assert.ErrorIs(t, err, ErrShuttingDown, "the combination the HTTP layer must answer outcome_unknown")
}
