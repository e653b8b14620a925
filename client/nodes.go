package client

import (
	"slices"
	"sync"
	"time"

	"github.com/quorate/quorate/api"
)

// Quarantine bounds: a node that failed an attempt is passed over for
// quarantineBase, twice as long after each further failure in a row, at
// most quarantineMax. It is still tried when every other node was.
const (
	quarantineBase = 100 * time.Millisecond
	quarantineMax  = 2 * time.Second
)

// nodeSet is every node the client knows (the endpoints and the leaders
// the routes name) with how each has fared lately.
type nodeSet struct {
	endpoints []string
	now       func() time.Time

	mu   sync.Mutex
	next int // where the round robin over endpoints starts
	// bad are the quarantines: node-wide (group -1), and per node and group
	// for failures that may be one group's (a group without a leader).
	bad map[nodeGroup]*strike
}

type nodeGroup struct {
	node  string
	group int
}

type strike struct {
	until time.Time
	count int
}

func newNodeSet(endpoints []string, now func() time.Time) *nodeSet {
	return &nodeSet{endpoints: endpoints, now: now, bad: map[nodeGroup]*strike{}}
}

// pick chooses where an attempt for group goes: its leader if it is well;
// else the next well endpoint or leader not tried yet; else any not tried
// yet; "" when every node was tried.
func (s *nodeSet) pick(group int, leader string, tried []string, leaders map[int]string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if leader != "" && !slices.Contains(tried, leader) && s.wellLocked(leader, group, now) {
		return leader
	}
	cands := s.candidatesLocked(leaders)
	s.next++
	var fallback string
	for i := range cands {
		n := cands[(s.next+i)%len(cands)]
		if slices.Contains(tried, n) {
			continue
		}
		if s.wellLocked(n, group, now) {
			return n
		}
		if fallback == "" {
			fallback = n
		}
	}
	return fallback
}

// order lists every node for a read: first (if given), then the well
// ones, then the rest.
func (s *nodeSet) order(first string, leaders map[int]string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var well, ill []string
	for _, n := range s.candidatesLocked(leaders) {
		switch {
		case n == first:
		case s.wellLocked(n, -1, now):
			well = append(well, n)
		default:
			ill = append(ill, n)
		}
	}
	out := make([]string, 0, len(well)+len(ill)+1)
	if first != "" {
		out = append(out, first)
	}
	return append(append(out, well...), ill...)
}

func (s *nodeSet) candidatesLocked(leaders map[int]string) []string {
	cands := slices.Clone(s.endpoints)
	for _, l := range leaders {
		if !slices.Contains(cands, l) {
			cands = append(cands, l)
		}
	}
	return cands
}

func (s *nodeSet) wellLocked(node string, group int, now time.Time) bool {
	if st := s.bad[nodeGroup{node, -1}]; st != nil && now.Before(st.until) {
		return false
	}
	if st := s.bad[nodeGroup{node, group}]; group >= 0 && st != nil && now.Before(st.until) {
		return false
	}
	return true
}

// failed records a failed attempt. A failure of the node itself (no
// connection, no answer, shutting down) puts the node aside for every
// group; an answer that the group could not decide puts it aside for that
// group only, since the node may serve the others well.
func (s *nodeSet) failed(node string, group int, err *Error) {
	key := nodeGroup{node, group}
	if err.Status == 0 || err.Code == api.CodeShuttingDown || err.Code == api.CodeNotReady || err.Code == "" || group < 0 {
		key.group = -1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.bad[key]
	if st == nil {
		st = &strike{}
		s.bad[key] = st
	}
	st.count++
	d := quarantineBase << min(st.count-1, 5)
	st.until = s.now().Add(min(d, quarantineMax))
}

// succeeded ends node's quarantines for group and for the whole node.
func (s *nodeSet) succeeded(node string, group int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) == 0 {
		return
	}
	delete(s.bad, nodeGroup{node, -1})
	delete(s.bad, nodeGroup{node, group})
}
