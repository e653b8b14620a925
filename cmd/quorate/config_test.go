package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
)

// The --config file takes every kind of policy the API does, and refuses
// a bad one with a message naming it.
func TestLoadConfigTakesEveryPolicy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "limits.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"default": {"capacity": 10, "refill_per_second": 1},
		"tiers": {"hourly": {"algorithm": "sliding_window", "limit": 1000, "window_seconds": 3600, "mode": "shadow", "when_unavailable": "allow"}}}`), 0o600))
	cfg, err := loadConfig(path)
	require.NoError(t, err)
	assert.Equal(t, bucket.Policy{Algorithm: bucket.SlidingWindow, Capacity: 1000, Window: 3600 * bucket.Second, Mode: bucket.Shadow, WhenUnavailable: bucket.AllowDegraded}, cfg.Tiers["hourly"])
	assert.True(t, cfg.Extended())

	require.NoError(t, os.WriteFile(path, []byte(`{"tiers": {"hourly": {"algorithm": "sliding_window", "limit": 20000, "window_seconds": 3600}}}`), 0o600))
	_, err = loadConfig(path)
	assert.ErrorIs(t, err, bucket.ErrInvalidPolicy)
	assert.ErrorContains(t, err, `tier "hourly"`)
}
