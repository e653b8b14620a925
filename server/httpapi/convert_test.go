package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/fsm"
)

// The api package states the identifier limits the state machine enforces.
func TestAPILimitsAreTheStateMachines(t *testing.T) {
	assert.Equal(t, fsm.MaxClientLen, api.MaxClientLen)
	assert.Equal(t, fsm.MaxRequestIDLen, api.MaxRequestIDLen)
}

// GET /v1/cluster answers what it answered when it wrote cluster.Status
// itself: the conversion to api.ClusterStatus drops and renames nothing.
func TestClusterStatusConversionKeepsEveryField(t *testing.T) {
	st := cluster.Status{NodeID: "n1", ClusterVersion: 2,
		Nodes: []cluster.NodeStatus{{ID: "n1", RaftAddr: "r", HTTPAddr: "h", State: "alive", Version: "v", MaxClusterVersion: 2}},
		Groups: []cluster.GroupStatus{{ID: "0", State: "Leader", Leader: "n1", Term: 3, AppliedIndex: 4, CommitIndex: 5,
			LastContact: time.Unix(6, 7).UTC(), Voters: []string{"n1"}, ConfigVersion: 8}}}
	want, err := json.Marshal(st)
	require.NoError(t, err)
	got, err := json.Marshal(clusterStatus(st))
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
}
