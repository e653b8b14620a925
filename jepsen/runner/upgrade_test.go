package runner

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/quorate/quorate/api"
)

func TestCheckUpgrade(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	last := t0.Add(10 * time.Second)
	view := func(cv uint32) map[string]clusterView {
		return map[string]clusterView{"http://n1": {ClusterVersion: cv}}
	}
	obs := []versionObs{{t0, "n1", 1}, {t0.Add(9 * time.Second), "n2", 0}, {last.Add(time.Second), "n1", 2}}
	assert.True(t, checkUpgrade(obs, last, view(2), nil).Valid)

	early := append(obs, versionObs{last.Add(-time.Millisecond), "n3", 2})
	r := checkUpgrade(early, last, view(2), nil)
	assert.False(t, r.Valid, "n3 reported version 2 before the last node ran the new binary")
	assert.Equal(t, 1, r.Summary["early"])

	assert.False(t, checkUpgrade(obs, last, view(1), nil).Valid, "a version that never moved proves nothing")
	assert.False(t, checkUpgrade(obs, last, view(2), errors.New("did not settle")).Valid)
	assert.False(t, checkUpgrade(obs, time.Time{}, view(2), nil).Valid, "a node never upgraded: every report of 2 is early")
}

func TestSettled(t *testing.T) {
	newNodes := []api.NodeStatus{{ID: "n1", Version: "v", MaxClusterVersion: 2}, {ID: "n2", Version: "v", MaxClusterVersion: 2}}
	mixed := []api.NodeStatus{{ID: "n1", Version: "v", MaxClusterVersion: 2}, {ID: "n2"}}
	view := func(cv uint32, nodes []api.NodeStatus) clusterView {
		return clusterView{ClusterVersion: cv, Nodes: nodes}
	}
	assert.True(t, settled(map[string]clusterView{"a": view(2, newNodes), "b": view(2, newNodes)}))
	assert.False(t, settled(map[string]clusterView{"a": view(2, newNodes), "b": view(1, newNodes)}), "b has not moved yet")
	assert.True(t, settled(map[string]clusterView{"a": view(0, mixed)}), "an old node holds the version at the base")
	assert.False(t, settled(map[string]clusterView{}))
}
