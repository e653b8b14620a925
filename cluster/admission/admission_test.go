package admission

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/diskguard"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/memlimit"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/raftgroup/raftgrouptest"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/grouphash"
)

// node is a gate over two real data groups, with a disk guard on a temp
// dir, no memory budget and no clock error unless a test sets them.
type node struct {
	gate    *Gate
	groups  []*raftgroup.Group
	pending int64
	clock   error
}

func newNode(t *testing.T, maxClients int) *node {
	n := &node{groups: []*raftgroup.Group{raftgrouptest.Single(t, "0", 0), raftgrouptest.Single(t, "1", 1)}}
	n.gate = &Gate{
		Disk:       diskguard.New(t.TempDir(), 0, slog.New(slog.DiscardHandler)),
		Memory:     memlimit.NewBudget(0, nil, func() int64 { return 0 }, func() int64 { return 0 }, slog.New(slog.DiscardHandler)),
		ClockErr:   func() error { return n.clock },
		MaxClients: maxClients,
		Groups:     func() []*raftgroup.Group { return n.groups },
		Pending:    func() int64 { return n.pending },
	}
	return n
}

// decide applies one decision for client in its group, creating its bucket.
func (n *node) decide(t *testing.T, client string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g := n.groups[grouphash.Of(client, len(n.groups))]
	_, err := g.ApplyLocal(ctx, fsm.Allow{Stamp: time.Now().UnixNano(), Requests: []fsm.AllowRequest{{Client: client, Cost: 1}}})
	require.NoError(t, err)
	require.True(t, g.FSM.Known(client))
}

// admit asks the gate about reqs as Node.Allow does: counted as pending
// while they are asked about.
func (n *node) admit(g *raftgroup.Group, reqs []fsm.AllowRequest) error {
	n.pending += int64(len(reqs))
	defer func() { n.pending -= int64(len(reqs)) }()
	return n.gate.Admit(g, reqs)
}

func ask(clients ...string) []fsm.AllowRequest {
	reqs := make([]fsm.AllowRequest, len(clients))
	for i, c := range clients {
		reqs[i] = fsm.AllowRequest{Client: c, Cost: 1}
	}
	return reqs
}

func TestANodeAtItsBudgetOfBucketsRefusesOnlyNewClients(t *testing.T) {
	n := newNode(t, 2)
	n.decide(t, "ann")
	require.NoError(t, n.admit(nil, ask("bob")), "one of two held")
	n.decide(t, "bob")

	err := n.admit(nil, ask("ann", "cat"))
	require.ErrorIs(t, err, errs.ErrTooManyClients, "a call with one new client is refused whole")
	assert.Contains(t, err.Error(), `"cat" is new`)
	assert.NoError(t, n.admit(nil, ask("ann", "bob")), "clients it holds are still decided")

	// At a group's leader the group is given: its own replica says who is known.
	g := n.groups[grouphash.Of("ann", 2)]
	assert.NoError(t, n.admit(g, ask("ann")))
}

func TestPendingDecisionsCountAgainstTheBudget(t *testing.T) {
	n := newNode(t, 2)
	n.decide(t, "ann")
	n.pending = 1 // another caller's new client, in flight
	assert.ErrorIs(t, n.admit(nil, ask("bob")), errs.ErrTooManyClients)
	n.pending = 0
	assert.NoError(t, n.admit(nil, ask("bob")))
	assert.ErrorIs(t, n.admit(nil, ask("bob", "cat")), errs.ErrTooManyClients, "two new ones would pass it")
}

func TestNoBudgetOfBucketsWhenNegative(t *testing.T) {
	n := newNode(t, -1)
	n.pending = 1 << 40
	assert.NoError(t, n.admit(nil, ask("ann", "bob")))
}

func TestALowDiskRefusesEverything(t *testing.T) {
	n := newNode(t, -1)
	n.decide(t, "ann")
	n.gate.Disk = diskguard.New(t.TempDir(), 1<<62, slog.New(slog.DiscardHandler)) // more reserve than any disk has
	n.gate.Disk.Check()
	assert.ErrorIs(t, n.admit(nil, ask("ann")), errs.ErrDiskFull, "even a known client: every decision writes the log")
}

func TestAClockOutOfBoundsRefusesOnlyWhereItWouldStamp(t *testing.T) {
	n := newNode(t, -1)
	n.clock = errors.New("clock out of bounds")
	assert.NoError(t, n.admit(nil, ask("ann")), "the node a call reached may forward it to a leader with a good clock")
	g := n.groups[grouphash.Of("ann", 2)]
	assert.ErrorIs(t, n.admit(g, ask("ann")), n.clock, "the leader would stamp it")
}

func TestNearTheMemoryBudgetOnlyStateThatExistsIsDecided(t *testing.T) {
	n := newNode(t, -1)
	n.decide(t, "ann")
	const budget = 100 << 20
	live := func() (uint64, uint64, uint64) { return budget, budget, 1 } // a collection found the budget's worth live
	n.gate.Memory = memlimit.NewBudget(budget, live, func() int64 { return 0 }, func() int64 { return 0 }, slog.New(slog.DiscardHandler))
	n.gate.Memory.Check()
	require.True(t, n.gate.Memory.High())

	assert.NoError(t, n.admit(nil, ask("ann")), "a client it holds")
	assert.ErrorIs(t, n.admit(nil, ask("bob")), memlimit.ErrBudget, "a new client")
	withID := ask("ann")
	withID[0].RequestID = "r1"
	assert.ErrorIs(t, n.admit(nil, withID), memlimit.ErrBudget, "a request id to remember")
}
