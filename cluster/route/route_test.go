package route

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/raftgroup/raftgrouptest"
	"github.com/quorate/quorate/cluster/reach"
)

// router is node n1's router over groups, with members as gossip's view
// (every member trusted) and a clock that does not move.
func router(t *testing.T, members map[string]membership.Member, groups ...*raftgroup.Group) *Router {
	now := time.Unix(1_800_000_000, 0)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return &Router{
		Self:    "n1",
		Members: func() (map[string]membership.Member, bool) { return members, members != nil },
		Reach:   reach.NewJudge(func() time.Time { return now }, "n1", raftgroup.LoopbackTimings, func() []*raftgroup.Group { return groups }),
		Stop:    stop,
	}
}

// leader is member id in state, at raftAddr and httpAddr, claiming to
// lead the group at index.
func leader(id string, state membership.State, raftAddr, httpAddr string, index int) membership.Member {
	leads := make([]bool, index+1)
	leads[index] = true
	return membership.Member{State: state, Leads: leads, Meta: membership.Meta{ID: id, RaftAddr: raftAddr, HTTPAddr: httpAddr}}
}

func TestLeaderOfIsSelfRaftOrGossip(t *testing.T) {
	served := raftgrouptest.Single(t, "0", 0)
	waiting := raftgrouptest.Waiting(t, "1", 1)
	members := map[string]membership.Member{
		"n2": leader("n2", membership.Dead, "10.0.0.2:7071", "", 1),
	}
	r := router(t, members, served, waiting)

	self, addr := r.LeaderOf(served)
	assert.True(t, self)
	assert.Empty(t, addr)

	self, addr = r.LeaderOf(waiting)
	assert.False(t, self)
	assert.Empty(t, addr, "a dead member's claim is not a leader")

	members["n3"] = leader("n3", membership.Alive, "10.0.0.3:7071", "", 1)
	_, addr = r.LeaderOf(waiting)
	assert.Equal(t, "10.0.0.3:7071", addr, "a replica without a leader learns it from gossip")

	r.Members = func() (map[string]membership.Member, bool) { return nil, false }
	_, addr = r.LeaderOf(waiting)
	assert.Empty(t, addr, "nor without gossip")
}

func TestRoutesNameEachLeadersHTTPAddress(t *testing.T) {
	served := raftgrouptest.Single(t, "0", 0)
	waiting := raftgrouptest.Waiting(t, "1", 1)
	unknown := raftgrouptest.Waiting(t, "2", 2)
	members := map[string]membership.Member{
		"n3": leader("n3", membership.Alive, "10.0.0.3:7071", "10.0.0.3:7070", 1),
	}
	r := router(t, members, served, waiting, unknown)
	rt := r.Routes([]*raftgroup.Group{served, waiting, unknown}, "10.0.0.1:7070")
	assert.Equal(t, 3, rt.Groups)
	assert.Equal(t, map[int]string{0: "10.0.0.1:7070", 1: "10.0.0.3:7070"}, rt.Leaders, "a group without a known leader is absent")
	assert.Equal(t, Version([]*raftgroup.Group{served, waiting, unknown}), rt.Version)
	assert.Positive(t, rt.Version, "the served group's term")
}

func TestAtLeaderRunsWhereTheGroupIsServed(t *testing.T) {
	served := raftgrouptest.Single(t, "0", 0)
	waiting := raftgrouptest.Waiting(t, "1", 1)
	members := map[string]membership.Member{
		"n3": leader("n3", membership.Alive, "10.0.0.3:7071", "", 1),
	}
	r := router(t, members, served, waiting)
	r.Reach.Contact("10.0.0.3:7071") // heard from just now: not silent
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	var ran []string
	local := func() error { ran = append(ran, "local"); return nil }
	remote := func(addr string) error { ran = append(ran, "remote "+addr); return nil }
	require.NoError(t, r.AtLeader(ctx, served, local, remote))
	require.NoError(t, r.AtLeader(ctx, waiting, local, remote))
	assert.Equal(t, []string{"local", "remote 10.0.0.3:7071"}, ran)
	assert.True(t, r.Proposes(served), "where AtLeader runs local")
	assert.False(t, r.Proposes(waiting), "where it forwards")

	refused := fmt.Errorf("%w: bad input", errs.ErrTooManyClients)
	err := r.AtLeader(ctx, served, func() error { return refused }, remote)
	assert.Equal(t, refused, err, "an error other than not-leader is the answer, not retried")
}

func TestAtLeaderRetriesANotLeaderUntilItsDeadline(t *testing.T) {
	served := raftgrouptest.Single(t, "0", 0)
	r := router(t, map[string]membership.Member{}, served)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	tries := 0
	err := r.AtLeader(ctx, served, func() error {
		tries++
		return fmt.Errorf("%w: stepped down", errs.ErrNotLeader)
	}, func(string) error { t.Error("no remote leader is known"); return nil })
	assert.ErrorIs(t, err, errs.ErrUnavailable, "nothing was appended: the caller may go elsewhere")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Greater(t, tries, 1, "retried")
	assert.False(t, errors.Is(err, errs.ErrOutcomeUnknown))
}
