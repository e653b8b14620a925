package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/quorate/quorate/cluster"
)

// clusterStatus asks one node for GET /v1/cluster.
func (t *tool) clusterStatus(ctx context.Context, n node) (cluster.Status, error) {
	var st cluster.Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.base+"/v1/cluster", nil)
	if err != nil {
		return st, err
	}
	resp, err := t.status.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: GET /v1/cluster: %d %s", n.id, resp.StatusCode, bytes.TrimSpace(body))
	}
	return st, json.Unmarshal(body, &st)
}

// views asks every node in ns for its status; nodes that do not answer are
// left out.
func (t *tool) views(ns []node) map[string]cluster.Status {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var mu sync.Mutex
	out := map[string]cluster.Status{}
	var wg sync.WaitGroup
	for _, n := range ns {
		wg.Go(func() {
			if st, err := t.clusterStatus(ctx, n); err == nil {
				mu.Lock()
				out[n.id] = st
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// leaderOf returns the leader of group gid as the nodes see it: a node that
// reports itself Leader (the highest term if several do), else the leader
// every view agrees on.
func leaderOf(views map[string]cluster.Status, gid string) (leader string, term uint64, ok bool) {
	agreed := ""
	for id, st := range views {
		for _, g := range st.Groups {
			if g.ID != gid {
				continue
			}
			if g.State == "Leader" && g.Term >= term {
				leader, term = id, g.Term
			}
			switch {
			case agreed == "":
				agreed = g.Leader
			case agreed != g.Leader:
				agreed = "?"
			}
		}
	}
	if leader != "" {
		return leader, term, true
	}
	if agreed != "" && agreed != "?" {
		for _, st := range views {
			for _, g := range st.Groups {
				if g.ID == gid && g.Term > term {
					term = g.Term
				}
			}
		}
		return agreed, term, true
	}
	return "", 0, false
}

func dataGroups(st cluster.Status) int {
	n := 0
	for _, g := range st.Groups {
		if g.ID != "meta" {
			n++
		}
	}
	return n
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
