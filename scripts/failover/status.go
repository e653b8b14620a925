package main

import (
	"context"
	"fmt"
	"time"

	"github.com/quorate/quorate/internal/clusterview"
)

// view asks node id for GET /v1/cluster through the API client and keeps
// what clusterview reads.
func (t *tool) view(ctx context.Context, id string) (clusterview.View, error) {
	n, ok := t.byID(id)
	if !ok {
		return clusterview.View{}, fmt.Errorf("unknown node %q", id)
	}
	st, err := n.api.Cluster(ctx)
	if err != nil {
		return clusterview.View{}, fmt.Errorf("%s: GET /v1/cluster: %w", id, err)
	}
	v := clusterview.View{NodeID: st.NodeID}
	for _, g := range st.Groups {
		v.Groups = append(v.Groups, clusterview.Group{ID: g.ID, State: g.State, Leader: g.Leader, Term: g.Term, Voters: g.Voters})
	}
	return v, nil
}

// views asks every node in ns for its status; nodes that do not answer
// within 2 s are left out.
func (t *tool) views(ns []node) map[string]clusterview.View {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = n.id
	}
	vs, _ := clusterview.Gather(ctx, ids, t.view)
	return vs
}

// leaderOf returns the leader of group gid as the nodes see it: a node that
// reports itself Leader (the highest term if several do), else the leader
// every view agrees on (the leader itself may not have answered).
func leaderOf(views map[string]clusterview.View, gid string) (leader string, term uint64, ok bool) {
	if id, g, ok := clusterview.Leader(views, gid); ok {
		return id, g.Term, true
	}
	return clusterview.Agreed(views, gid)
}

// health reports whether every node answers and sees every group with
// want voters and a leader that is one of the nodes; if so, it also
// returns the leaders (group id -> node id) all nodes agree on, or nil if
// they disagree.
func (t *tool) health(want int) (leaders map[string]string, healthy bool, why string) {
	views := t.views(t.nodes)
	if len(views) != len(t.nodes) {
		return nil, false, fmt.Sprintf("%d of %d nodes answer", len(views), len(t.nodes))
	}
	leaders = map[string]string{}
	agree := true
	for id, st := range views {
		for _, g := range st.Groups {
			if len(g.Voters) != want {
				return nil, false, fmt.Sprintf("%s sees group %s with %d voters", id, g.ID, len(g.Voters))
			}
			if _, ok := t.byID(g.Leader); !ok {
				return nil, false, fmt.Sprintf("%s sees group %s with leader %q", id, g.ID, g.Leader)
			}
			if l, seen := leaders[g.ID]; seen && l != g.Leader {
				agree = false
			}
			leaders[g.ID] = g.Leader
		}
	}
	if !agree {
		return nil, true, "nodes disagree on a leader"
	}
	return leaders, true, ""
}
