// Package clusterview reads a cluster from the outside, the way the fault
// suite (jepsen/control) and the failover timer (scripts/failover) do: each
// node's answer to GET /v1/cluster, gathered from every node at once, and
// who leads a group according to those answers.
//
// It depends on the HTTP API's JSON only, not on the node's packages, so
// that programs which drive a cluster need not link it.
package clusterview

import (
	"context"
	"sync"
)

// View is the part of one node's GET /v1/cluster answer that tools read:
// the node's view of every group.
type View struct {
	NodeID string  `json:"node_id"`
	Groups []Group `json:"groups"`
}

// Group is one raft group as a node sees it.
type Group struct {
	// ID is "meta" or a data group, "0".."G-1".
	ID string `json:"id"`
	// State is the node's own raft state in the group: "Leader",
	// "Follower", "Candidate" or "Shutdown".
	State string `json:"state"`
	// Leader is the node id the node believes leads the group, "" if none.
	Leader string   `json:"leader"`
	Term   uint64   `json:"term"`
	Voters []string `json:"voters"`
}

// MetaGroup is the ID of the meta group; every other group is a data group.
const MetaGroup = "meta"

// DataGroups returns how many data groups v lists.
func (v View) DataGroups() int {
	n := 0
	for _, g := range v.Groups {
		if g.ID != MetaGroup {
			n++
		}
	}
	return n
}

// Gather asks every node in nodes for its view with get, concurrently, and
// waits for all the answers. The nodes whose get failed are left out of
// views and are in errs instead. Bound the wait with ctx.
func Gather[K comparable](ctx context.Context, nodes []K, get func(context.Context, K) (View, error)) (views map[K]View, errs map[K]error) {
	var mu sync.Mutex
	views, errs = map[K]View{}, map[K]error{}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			v, err := get(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[n] = err
			} else {
				views[n] = v
			}
		})
	}
	wg.Wait()
	return views, errs
}

// Leader returns the node whose own view says it is Leader of group gid,
// and that view of the group; if several do (an old leader that has not
// heard of the new term yet), the one with the highest term. ok is false
// if no view says so.
func Leader[K comparable](views map[K]View, gid string) (node K, g Group, ok bool) {
	for k, v := range views {
		for _, vg := range v.Groups {
			if vg.ID == gid && vg.State == "Leader" && (!ok || vg.Term > g.Term) {
				node, g, ok = k, vg, true
			}
		}
	}
	return node, g, ok
}

// Agreed returns the leader of group gid that every view listing the group
// names (a node id), with the highest term any of them has seen. ok is
// false if no view lists the group, or the views name different leaders,
// or they name none.
func Agreed[K comparable](views map[K]View, gid string) (leader string, term uint64, ok bool) {
	seen := false
	for _, v := range views {
		for _, g := range v.Groups {
			if g.ID != gid {
				continue
			}
			if seen && g.Leader != leader {
				return "", 0, false
			}
			seen, leader, term = true, g.Leader, max(term, g.Term)
		}
	}
	if !seen || leader == "" {
		return "", 0, false
	}
	return leader, term, true
}
