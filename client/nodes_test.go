package client

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/quorate/quorate/api"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var (
	dialFailure = &Error{Node: "a", kind: api.RetrySafe}
	noLeader    = &Error{Status: 503, Code: api.CodeUnavailable, kind: api.RetrySafe}
)

func TestPickPrefersTheLeaderThenWellNodesThenAnyUntried(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	s := newNodeSet([]string{"a", "b", "c"}, clk.now)
	assert.Equal(t, "b", s.pick(0, "b", nil, nil), "the group's leader first")
	assert.NotEqual(t, "b", s.pick(0, "b", []string{"b"}, nil), "a retry goes elsewhere")

	s.failed("b", 0, dialFailure)
	for range 6 {
		assert.NotEqual(t, "b", s.pick(0, "b", nil, nil), "a node that refused connections is passed over")
	}
	assert.Equal(t, "b", s.pick(0, "b", []string{"a", "c"}, nil), "...unless every other node was tried")
	assert.Empty(t, s.pick(0, "b", []string{"a", "b", "c"}, nil), "every node tried")

	clk.add(quarantineBase)
	assert.Equal(t, "b", s.pick(0, "b", nil, nil), "its quarantine ran out")
	s.failed("b", 0, dialFailure)
	clk.add(quarantineBase)
	assert.NotEqual(t, "b", s.pick(0, "b", nil, nil), "a second failure in a row doubles the quarantine")
	clk.add(quarantineBase)
	assert.Equal(t, "b", s.pick(0, "b", nil, nil))
	s.succeeded("b", 0)
	s.failed("b", 0, dialFailure)
	clk.add(quarantineBase)
	assert.Equal(t, "b", s.pick(0, "b", nil, nil), "a success resets the count")
}

func TestAGroupsTroubleQuarantinesTheNodeForThatGroupOnly(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	s := newNodeSet([]string{"a", "b"}, clk.now)
	s.failed("a", 1, noLeader)
	assert.Equal(t, "a", s.pick(0, "a", nil, nil), "group 0 is served well by a")
	assert.Equal(t, "b", s.pick(1, "a", nil, nil), "group 1 is not")
}

func TestPickIncludesTheLeadersTheRoutesName(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	s := newNodeSet([]string{"a"}, clk.now)
	s.failed("a", -1, dialFailure)
	assert.Equal(t, "z", s.pick(2, "", nil, map[int]string{2: "z"}), "a leader outside the endpoints is a node too")
	assert.Equal(t, []string{"z", "a"}, s.order("", map[int]string{2: "z"}), "well nodes first")
}
