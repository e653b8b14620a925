package raftgroup

import (
	"errors"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
)

// HandOver transfers the leadership of g, if this node leads it, to
// another voter (raft picks the most up-to-date one and tells it to stand
// at once), and waits until this node sees the new leader, so that the
// survivors lead within a round trip and an election instead of after a
// heartbeat timeout without a leader. Entries in flight end as raft ends
// them when it steps down (ErrLeadershipLost: ambiguous, resolved by the
// caller's node); requests arriving meanwhile are refused as "not the
// leader" and retried at the new one. It gives up after raft's own
// transfer timeout (an election timeout) plus one more election timeout to
// see the new leader.
//
// self is this node's id; live lists g's voters this node heard from
// lately, the most recently heard first (see HandOverElsewhere).
func (g *Group) HandOver(self string, electionTimeout time.Duration, live func(*Group) ([]raft.Server, bool), logger *slog.Logger) {
	if g.Raft.State() != raft.Leader {
		return
	}
	start := time.Now()
	err := g.Raft.LeadershipTransfer().Error()
	if err != nil && !errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		err = g.HandOverElsewhere(live, err, logger)
	}
	// A transfer already in progress (placement's) is waited for below.
	if err != nil && !errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		logger.Warn("leadership hand-over failed; stopping anyway", "group", g.ID, "err", err)
		return
	}
	wait := time.NewTimer(electionTimeout)
	defer wait.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if _, id := g.Raft.LeaderWithID(); id != "" && string(id) != self {
			logger.Info("leadership handed over", "group", g.ID, "to", id, "took", time.Since(start).String())
			return
		}
		select {
		case <-wait.C:
			logger.Warn("leadership handed over, but no new leader seen yet; stopping anyway", "group", g.ID)
			return
		case <-tick.C:
		}
	}
}

// HandOverElsewhere transfers g's leadership after raft's own pick failed
// (why): raft picks the most up-to-date voter whether it is running or not,
// and in a rolling restart that is often the node stopped just before this
// one. It tries g's other voters this node has heard from within the reach
// window, the most recently heard first, and returns the last error if
// none takes it.
func (g *Group) HandOverElsewhere(live func(*Group) ([]raft.Server, bool), why error, logger *slog.Logger) error {
	voters, ok := live(g)
	if !ok {
		return why
	}
	err := why
	for _, s := range voters {
		if err = g.Raft.LeadershipTransferToServer(s.ID, s.Address).Error(); err == nil {
			logger.Info("leadership handed over to another voter after raft's pick failed", "group", g.ID, "to", s.ID, "first", why)
			return nil
		}
	}
	return err
}
