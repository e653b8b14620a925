// Package admission decides whether a node takes a call at all, before
// anything is proposed: not while its disk is nearly full, nor while its
// clock is off where it would stamp, nor new state near its memory budget,
// nor a new client past its budget of buckets. The node checks a call as a
// whole where it arrives, and each group's leader checks again.
package admission

import (
	"fmt"

	"github.com/quorate/quorate/cluster/diskguard"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/memlimit"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/grouphash"
)

// Gate is one node's admission: the guards it asks and its budget of
// buckets.
type Gate struct {
	// Disk refuses everything while the data dir is nearly full.
	Disk *diskguard.Guard
	// Memory refuses new state near the memory budget.
	Memory *memlimit.Budget
	// ClockErr refuses (as not the leader) while the node's clock is not
	// in bounds.
	ClockErr func() error
	// MaxClients is the most buckets the node may hold (negative: no limit).
	MaxClients int
	// Groups returns the node's data groups.
	Groups func() []*raftgroup.Group
	// Pending returns the decisions the node's callers wait for.
	Pending func() int64
}

// Admit refuses reqs, deciding nothing, while the node is low on disk,
// while its clock is off (only where it would stamp them: g is set on a
// group's leader), while it sheds new state near its memory budget, or if
// one would create a bucket while the node holds its budget of them
// (MaxClients). g is the requests' group, or nil to
// look each client's up. Entries in flight are not counted, so the budget
// may be passed by what they create.
func (a *Gate) Admit(g *raftgroup.Group, reqs []fsm.AllowRequest) error {
	groups := a.Groups()
	groupFor := func(client string) *raftgroup.Group { return groups[grouphash.Of(client, len(groups))] }
	if err := a.Disk.Err(); err != nil {
		return err
	}
	known := func(client string) bool { return groupFor(client).FSM.Known(client) }
	if g != nil { // only a leader stamps: the node a call reached may forward it
		if err := a.ClockErr(); err != nil {
			return err
		}
		known = g.FSM.Known
	}
	if err := a.Memory.Err(reqs, known); err != nil {
		return err
	}
	if a.MaxClients < 0 {
		return nil
	}
	total := 0
	for _, gg := range groups {
		total += gg.FSM.Buckets()
	}
	// Decisions in flight may each create a bucket once applied: counted,
	// so that concurrent calls of new clients cannot overshoot the limit
	// together (each new bucket is pending or held, and sometimes both for
	// a moment, which only refuses early).
	if total+int(max(a.Pending(), 0)) <= a.MaxClients {
		return nil
	}
	for _, r := range reqs {
		rg := g
		if rg == nil {
			rg = groupFor(r.Client)
		}
		if !rg.FSM.Known(r.Client) {
			return fmt.Errorf("%w: this node holds %d of at most %d, and %q is new", errs.ErrTooManyClients, total, a.MaxClients, r.Client)
		}
	}
	return nil
}
