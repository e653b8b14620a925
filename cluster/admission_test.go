package cluster

import (
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
	"github.com/quorate/quorate/fsm"
)

// A node with more decisions pending than it may queue refuses a call at
// once with ErrOverloaded, decides nothing, and takes calls again when the
// backlog is gone.
func TestOverloadedNodeRefusesAtOnce(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual(), func(o *Options) { o.MaxPending = 10 })
	n.pending.Store(10) // ten decisions already waiting
	_, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "ana", Cost: 1}})
	require.ErrorIs(t, err, ErrOverloaded)
	assert.NotErrorIs(t, err, ErrUnavailable, "a refusal, not a timeout")
	assert.Equal(t, int64(10), n.pending.Load(), "the refused call leaves no trace")
	n.pending.Store(0)
	v, err := n.Client(ctx(t), "ana")
	require.NoError(t, err)
	assert.False(t, v.Known, "nothing was decided for the refused call")

	ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "ana", Cost: 1}})
	require.NoError(t, err)
	assert.True(t, ds[0].Allowed)
	assert.Zero(t, n.pending.Load())
	// One call larger than the whole budget is still taken when nothing
	// else is pending, or it could never be.
	big := make([]fsm.AllowRequest, 11)
	for i := range big {
		big[i] = fsm.AllowRequest{Client: "ana", Cost: 0}
	}
	_, err = n.Allow(ctx(t), big)
	assert.NoError(t, err)
}

// Past --max-clients a node refuses requests that would create a bucket,
// serves the clients it holds, and takes new ones again once reclaim has
// forgotten full buckets.
func TestMaxClientsRefusesOnlyNewClients(t *testing.T) {
	clock := clock.NewManual()
	n := startNode(t, t.TempDir(), clock, func(o *Options) { o.MaxClients = 2 })
	_, err := n.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: bucket.Policy{Capacity: 5, Rate: bucket.Scale}})
	require.NoError(t, err)
	for _, c := range []string{"a", "b"} {
		_, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: c, Cost: 1}})
		require.NoError(t, err)
	}
	_, err = n.Allow(ctx(t), []fsm.AllowRequest{{Client: "c", Cost: 1}})
	require.ErrorIs(t, err, ErrTooManyClients)
	_, err = n.Allow(ctx(t), []fsm.AllowRequest{{Client: "a", Cost: 1}, {Client: "c", Cost: 1}})
	require.ErrorIs(t, err, ErrTooManyClients, "a call with a new client is refused as a whole")
	ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "a", Cost: 1}})
	require.NoError(t, err, "a known client is still served")
	assert.Equal(t, int64(3), ds[0].RemainingTokens())

	clock.Advance(10 * time.Second) // every bucket refills: reclaim forgets them
	n.reclaim()
	_, err = n.Allow(ctx(t), []fsm.AllowRequest{{Client: "c", Cost: 1}})
	assert.NoError(t, err)
}

// Tiers are capped where they are created; changing an existing tier at the
// cap is still allowed.
func TestTierCap(t *testing.T) {
	n := startNode(t, t.TempDir(), clock.NewManual())
	p := bucket.Policy{Capacity: 1, Rate: bucket.Scale}
	// Fill the configuration to the cap in one committed entry, as a
	// restored or older cluster might hold it.
	cfg := n.meta.FSM.Config()
	big := bucket.Config{Version: cfg.Version + 1, Default: cfg.Default, Tiers: map[string]bucket.Policy{}}
	for i := range bucket.MaxTiers {
		big.Tiers[fmt.Sprintf("t%d", i)] = p
	}
	_, err := n.meta.ApplyLocal(ctx(t), fsm.InstallConfig{Config: big})
	require.NoError(t, err)

	_, err = n.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "one-more", Policy: p})
	require.ErrorIs(t, err, bucket.ErrTooManyTiers)
	_, err = n.ChangeConfig(ctx(t), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: "t7", Policy: bucket.Policy{Capacity: 2, Rate: bucket.Scale}})
	assert.NoError(t, err, "an existing tier may still change")

	big.Tiers["one-more"] = p
	_, err = New(Options{NodeID: "x", DataDir: t.TempDir(), Initial: big})
	assert.ErrorIs(t, err, bucket.ErrTooManyTiers, "an initial configuration past the cap is refused")
}

// Near its memory budget a node refuses what would add state (a new
// client, a request id), at once and deciding nothing, and keeps deciding
// for the clients it holds; it takes new state again once the heap shrinks.
func TestMemoryBudgetShedsNewState(t *testing.T) {
	var live atomic.Uint64
	live.Store(10 << 20)
	n := startNode(t, t.TempDir(), clock.NewManual(), func(o *Options) {
		o.MaxMemory = 100 << 20
		o.readHeap = func() (uint64, uint64, uint64) { return live.Load(), live.Load(), live.Load() }
	})
	_, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "held", Cost: 1}})
	require.NoError(t, err)

	live.Store(80 << 20) // 80% of the budget
	n.mem.Check()
	for _, r := range []fsm.AllowRequest{{Client: "new", Cost: 1}, {Client: "held", Cost: 1, RequestID: "r1"}} {
		_, err = n.Allow(ctx(t), []fsm.AllowRequest{r})
		require.ErrorIs(t, err, ErrOverloaded, "%+v", r)
		assert.ErrorContains(t, err, "memory budget")
	}
	v, err := n.Client(ctx(t), "new")
	require.NoError(t, err)
	assert.False(t, v.Known, "the refused call decided nothing")
	ds, err := n.Allow(ctx(t), []fsm.AllowRequest{{Client: "held", Cost: 1}})
	require.NoError(t, err, "a held client without a request id is still decided")
	assert.Equal(t, int64(8), ds[0].RemainingTokens())

	// The leader checks too: a call forwarded to it, or one that reached
	// the batcher another way, is refused there.
	g := n.groupFor("new2")
	assert.ErrorIs(t, n.admission.Admit(g, []fsm.AllowRequest{{Client: "new2", Cost: 1}}), ErrOverloaded)

	live.Store(50 << 20)
	n.mem.Check()
	_, err = n.Allow(ctx(t), []fsm.AllowRequest{{Client: "new", Cost: 1, RequestID: "r2"}})
	assert.NoError(t, err)
}

// The live-heap estimate follows the replicas' state between collections:
// state added since the last one counts at once, and state gone since
// (reclaimed buckets, forgotten ids) stops counting at once.
func TestMemoryEstimateFollowsTheStateBetweenCollections(t *testing.T) {
	var live, cycles atomic.Uint64
	live.Store(50 << 20)
	cycles.Store(1)
	clock := clock.NewManual()
	n := startNode(t, t.TempDir(), clock, func(o *Options) {
		o.MaxMemory = 1 << 30
		o.readHeap = func() (uint64, uint64, uint64) { return live.Load(), live.Load(), cycles.Load() }
	})
	n.mem.Check()
	base, stateBefore := n.mem.Estimate(), n.stateBytes()
	var reqs []fsm.AllowRequest
	for i := range 100 {
		reqs = append(reqs, fsm.AllowRequest{Client: fmt.Sprintf("c%03d", i), Cost: 1, RequestID: fmt.Sprintf("r%03d", i)})
	}
	_, err := n.Allow(ctx(t), reqs)
	require.NoError(t, err)
	n.mem.Check()
	grown := n.mem.Estimate()
	assert.Equal(t, n.stateBytes()-stateBefore, int64(grown-base), "the state added counts before any collection")

	// A collection sees it live; then everything goes (buckets full again,
	// ids forgotten) before the next one.
	live.Store(grown)
	cycles.Add(1)
	n.mem.Check()
	clock.Advance(10 * time.Minute)
	n.reclaim()
	n.mem.Check()
	assert.Equal(t, base, n.mem.Estimate(), "state gone since the last collection no longer counts")
}

// --max-clients holds when calls of new clients arrive together: a bucket
// is counted from the moment its decision is pending, not only once it is
// applied (16 parallel batches used to take a limit of 10,000 to 18,000).
func TestMaxClientsHoldsUnderConcurrentNewClients(t *testing.T) {
	const limit, workers, batch = 500, 16, 100
	n := startNode(t, t.TempDir(), clock.NewManual(), func(o *Options) { o.MaxClients = limit })
	var wg sync.WaitGroup
	var refused atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := make([]fsm.AllowRequest, batch)
			for i := range reqs {
				reqs[i] = fsm.AllowRequest{Client: fmt.Sprintf("w%02d-%03d", w, i), Cost: 1}
			}
			if _, err := n.Allow(ctx(t), reqs); errors.Is(err, ErrTooManyClients) {
				refused.Add(1)
			} else {
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, g := range n.groups {
		total += g.FSM.Buckets()
	}
	assert.LessOrEqual(t, total, limit, "buckets past --max-clients")
	assert.Positive(t, refused.Load(), "%d new clients for a limit of %d: some calls are refused", workers*batch, limit)
	assert.Positive(t, total, "some calls were decided")
}
