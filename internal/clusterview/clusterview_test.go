package clusterview

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lead(id string, term uint64, voters ...string) Group {
	return Group{ID: id, State: "Leader", Term: term, Voters: voters}
}

func follow(id, leader string, term uint64) Group {
	return Group{ID: id, State: "Follower", Leader: leader, Term: term}
}

func TestDecodesTheAPIAnswer(t *testing.T) {
	// An answer of GET /v1/cluster, with fields View does not read.
	raw := `{"node_id":"node2","nodes":[{"id":"node1","state":"alive"}],"groups":[
		{"id":"meta","state":"Follower","leader":"node1","term":3,"applied_index":9,"voters":["node1","node2","node3"],"config_version":2},
		{"id":"0","state":"Leader","leader":"node2","term":4,"voters":["node1","node2","node3"]}]}`
	var v View
	require.NoError(t, json.Unmarshal([]byte(raw), &v))
	assert.Equal(t, View{NodeID: "node2", Groups: []Group{
		{ID: "meta", State: "Follower", Leader: "node1", Term: 3, Voters: []string{"node1", "node2", "node3"}},
		{ID: "0", State: "Leader", Leader: "node2", Term: 4, Voters: []string{"node1", "node2", "node3"}},
	}}, v)
	assert.Equal(t, 1, v.DataGroups())
}

func TestLeader(t *testing.T) {
	views := map[int]View{
		1: {Groups: []Group{lead("meta", 2, "n1", "n2", "n3"), follow("0", "n2", 3)}},
		2: {Groups: []Group{follow("meta", "n1", 2), lead("0", 3, "n1", "n2", "n3")}},
	}
	n, g, ok := Leader(views, "0")
	assert.True(t, ok)
	assert.Equal(t, 2, n)
	assert.Equal(t, uint64(3), g.Term)
	_, _, ok = Leader(views, "7")
	assert.False(t, ok)

	// Two self-reported leaders: the higher term wins, whatever the order.
	for range 20 {
		split := map[string]View{
			"n1": {Groups: []Group{lead("0", 4)}},
			"n2": {Groups: []Group{follow("0", "", 7)}},
			"n3": {Groups: []Group{lead("0", 7)}},
		}
		n, g, ok := Leader(split, "0")
		assert.True(t, ok)
		assert.Equal(t, "n3", n)
		assert.Equal(t, uint64(7), g.Term)
	}
}

func TestAgreed(t *testing.T) {
	views := map[string]View{
		"n1": {Groups: []Group{follow("0", "n2", 5)}},
		"n3": {Groups: []Group{follow("0", "n2", 6), follow("1", "n1", 1)}},
	}
	l, term, ok := Agreed(views, "0")
	assert.True(t, ok)
	assert.Equal(t, "n2", l)
	assert.Equal(t, uint64(6), term)
	_, _, ok = Agreed(views, "2")
	assert.False(t, ok, "no view lists it")

	for range 20 {
		views["n1"] = View{Groups: []Group{follow("0", "", 5)}}
		_, _, ok = Agreed(views, "0")
		assert.False(t, ok, "one view knows no leader")
		views["n1"] = View{Groups: []Group{follow("0", "n3", 5)}}
		_, _, ok = Agreed(views, "0")
		assert.False(t, ok, "the views disagree")
	}
	_, _, ok = Agreed(map[string]View{"n1": {Groups: []Group{follow("0", "", 1)}}}, "0")
	assert.False(t, ok, "nobody knows a leader")
}

func TestGather(t *testing.T) {
	down := errors.New("down")
	vs, errs := Gather(context.Background(), []int{1, 2, 3}, func(_ context.Context, i int) (View, error) {
		if i == 2 {
			return View{}, down
		}
		return View{NodeID: "n" + string(rune('0'+i))}, nil
	})
	assert.Equal(t, map[int]View{1: {NodeID: "n1"}, 3: {NodeID: "n3"}}, vs)
	assert.Equal(t, map[int]error{2: down}, errs)
}
