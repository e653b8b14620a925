package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// Allow decides reqs and returns one decision per request, in order. Each
// request is decided in its client's group; requests of one group ride in
// the same log entry. Every decision is committed and applied before Allow
// returns it.
func (n *Node) Allow(ctx context.Context, reqs []fsm.AllowRequest) ([]fsm.Decision, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	first := GroupOf(reqs[0].Client, len(n.groups))
	same := true
	for _, r := range reqs[1:] {
		if GroupOf(r.Client, len(n.groups)) != first {
			same = false
			break
		}
	}
	if same {
		return n.groups[first].batch.submit(ctx, reqs)
	}

	// Split by group, decide the parts in parallel, put answers back in order.
	byGroup := map[int][]int{}
	for i, r := range reqs {
		g := GroupOf(r.Client, len(n.groups))
		byGroup[g] = append(byGroup[g], i)
	}
	out := make([]fsm.Decision, len(reqs))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
	)
	for gi, idx := range byGroup {
		part := make([]fsm.AllowRequest, len(idx))
		for j, i := range idx {
			part[j] = reqs[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds, err := n.groups[gi].batch.submit(ctx, part)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if errs == nil {
					errs = err
				}
				return
			}
			for j, i := range idx {
				out[i] = ds[j]
			}
		}()
	}
	wg.Wait()
	if errs != nil {
		return nil, errs
	}
	return out, nil
}

// Client returns client's state as of now, read from its group's leader
// after confirming leadership, without consuming anything.
func (n *Node) Client(ctx context.Context, client string) (fsm.ClientView, error) {
	g := n.groupFor(client)
	if err := g.verifyRead(ctx); err != nil {
		return fsm.ClientView{}, err
	}
	return g.fsm.View(client, n.opts.Clock.Now().UnixNano()), nil
}

// SetClientTier assigns client to tier in the client's group; an empty tier
// removes the assignment. The tier need not exist: until it does, the client
// uses the default policy.
func (n *Node) SetClientTier(ctx context.Context, client, tier string) error {
	if tier != "" {
		if err := bucket.ValidateTierName(tier); err != nil {
			return err
		}
	}
	_, err := n.groupFor(client).apply(ctx, fsm.SetTier{Client: client, Tier: tier})
	return err
}

// ChangeConfig commits op in the meta group and then waits, for most of what
// is left of ctx, until every data group has applied the new version. Groups
// that have not by then are reported as lagging; they apply it when they can.
func (n *Node) ChangeConfig(ctx context.Context, op fsm.ConfigOp) (ConfigChange, error) {
	if err := validateOp(op); err != nil {
		return ConfigChange{}, err
	}
	res, err := n.meta.apply(ctx, op)
	if err != nil {
		return ConfigChange{}, err
	}
	cr, ok := res.(*fsm.ConfigResult)
	if !ok {
		return ConfigChange{}, fmt.Errorf("meta group: unexpected apply result %T", res)
	}
	if cr.Err != nil {
		return ConfigChange{}, cr.Err
	}
	n.triggerReconcile()
	return n.waitApplied(ctx, cr.Version), nil
}

func validateOp(op fsm.ConfigOp) error {
	switch op.Kind {
	case fsm.OpSetTier:
		if err := bucket.ValidateTierName(op.Tier); err != nil {
			return err
		}
		return op.Policy.Validate()
	case fsm.OpDeleteTier:
		return bucket.ValidateTierName(op.Tier)
	case fsm.OpSetDefault:
		if err := op.Policy.Validate(); err != nil {
			return fmt.Errorf("default policy: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unknown config operation %d", op.Kind)
}

// waitApplied waits until every data group applied version, or until 90% of
// ctx's remaining time is spent, and reports which groups did.
func (n *Node) waitApplied(ctx context.Context, version uint64) ConfigChange {
	wait := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d) * 9 / 10
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for {
		cc := ConfigChange{Version: version}
		for _, g := range n.groups {
			if g.fsm.Config().Version >= version {
				cc.Applied = append(cc.Applied, g.id)
			} else {
				cc.Lagging = append(cc.Lagging, g.id)
			}
		}
		if len(cc.Lagging) == 0 {
			return cc
		}
		select {
		case <-poll.C:
		case <-deadline.C:
			return cc
		case <-ctx.Done():
			return cc
		}
	}
}

// Config returns the configuration in force, read from the meta group's
// leader after confirming leadership.
func (n *Node) Config(ctx context.Context) (bucket.Config, error) {
	if err := n.meta.verifyRead(ctx); err != nil {
		return bucket.Config{}, err
	}
	return n.meta.fsm.Config(), nil
}

// Ready returns nil when every group has a leader that serves.
func (n *Node) Ready(ctx context.Context) error {
	for _, g := range append([]*group{n.meta}, n.groups...) {
		if _, id := g.raft.LeaderWithID(); id == "" {
			return fmt.Errorf("%w: group %s has no leader", ErrUnavailable, g.id)
		}
		if g.raft.State() == raft.Leader && !g.serving.Load() {
			return fmt.Errorf("%w: group %s: new leader is catching up", ErrUnavailable, g.id)
		}
	}
	return nil
}

// Status returns this node's view of every group.
func (n *Node) Status(ctx context.Context) (Status, error) {
	st := Status{NodeID: n.opts.NodeID}
	st.Nodes = []NodeStatus{{ID: n.opts.NodeID, RaftAddr: n.opts.RaftAddr, HTTPAddr: n.opts.HTTPAddr, State: "alive"}}
	for _, g := range append([]*group{n.meta}, n.groups...) {
		st.Groups = append(st.Groups, g.status())
	}
	return st, nil
}

func (g *group) status() GroupStatus {
	_, leader := g.raft.LeaderWithID()
	gs := GroupStatus{
		ID:            g.id,
		State:         g.raft.State().String(),
		Leader:        string(leader),
		AppliedIndex:  g.raft.AppliedIndex(),
		CommitIndex:   g.raft.CommitIndex(),
		ConfigVersion: g.fsm.Config().Version,
	}
	stats := g.raft.Stats()
	fmt.Sscan(stats["term"], &gs.Term)
	if g.raft.State() != raft.Leader {
		gs.LastContact = g.raft.LastContact()
	}
	if f := g.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				gs.Voters = append(gs.Voters, string(s.ID))
			}
		}
		slices.Sort(gs.Voters)
	}
	return gs
}
