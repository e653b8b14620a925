package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorate/quorate/internal/freeport"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/version"
)

// startServe runs `quorate serve` in-process and returns a client for it and
// a function that stops it (as SIGTERM would) and returns serve's error.
func startServe(t *testing.T, args ...string) (*client.Node, string, func() error) {
	t.Helper()
	addr, raftAddr, gossipAddr := freeport.Addr(t), freeport.Addr(t), freeport.Addr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--http-addr", addr, "--raft-addr", raftAddr, "--gossip-addr", gossipAddr,
			"--log-level", "warn", "--groups", "4"}, args...), &bytes.Buffer{}, &stderr)
	}()
	c := client.NewNode(addr, nil)
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			done <- err
			return true
		default:
		}
		return c.Ready(context.Background()) == nil
	}, 15*time.Second, 10*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("serve exited early: %v\n%s", err, stderr.String())
	default:
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { _ = stop() })
	return c, addr, stop
}

func TestServeSeedsConfigAndSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "limits.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"default":{"capacity":3,"refill_per_second":0},
		"tiers":{"free":{"capacity":5,"refill_per_second":0.5}}}`), 0o644))
	data := filepath.Join(dir, "data")
	ctx := context.Background()

	c, _, stop := startServe(t, "--data-dir", data, "--config", cfg)
	tiers, err := c.Tiers(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(3), tiers.Default.Capacity)
	assert.Equal(t, "0.5", tiers.Tiers["free"].RefillPerSecond.String())
	require.NoError(t, c.SetClientTier(ctx, "alice", "free"))
	for range 5 {
		r, err := c.Allow(ctx, "alice", 1, "")
		require.NoError(t, err)
		require.True(t, r.Allowed)
	}
	r, err := c.Allow(ctx, "bob", 3, "")
	require.NoError(t, err)
	require.True(t, r.Allowed)
	assert.Equal(t, "default", r.Tier)
	require.NoError(t, stop(), "graceful shutdown")

	// Restart on the same data dir: same balances (bob never refills), same tiers.
	c, _, stop = startServe(t, "--data-dir", data, "--config", cfg)
	r, err = c.Allow(ctx, "bob", 1, "")
	require.NoError(t, err)
	assert.False(t, r.Allowed, "bob's empty rate-0 bucket must survive the restart")
	got, err := c.GetClient(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, "free", got.Tier)
	assert.Less(t, got.Remaining, int64(5), "alice must not get a fresh bucket")
	require.NoError(t, stop())
}

func TestServeRefusesInvalidDefault(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"default":{"capacity":0,"refill_per_second":1}}`), 0o644))
	err := run(context.Background(), []string{"serve", "--data-dir", filepath.Join(dir, "d"), "--config", cfg, "--http-addr", freeport.Addr(t)}, &bytes.Buffer{}, &bytes.Buffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "capacity must be at least 1")
}

func TestServeReadsEnvironment(t *testing.T) {
	t.Setenv("QUORATE_GROUPS", "not-a-number")
	err := run(context.Background(), []string{"serve", "--data-dir", t.TempDir()}, &bytes.Buffer{}, &bytes.Buffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "QUORATE_GROUPS")
	assert.Equal(t, 2, exitCode(err))
}

func TestCLIAgainstServer(t *testing.T) {
	_, addr, _ := startServe(t, "--data-dir", filepath.Join(t.TempDir(), "d"))
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append(args, "--addr", addr), &out, &bytes.Buffer{})
		return out.String(), err
	}
	out, err := cli("tier", "set", "free", "--capacity", "2", "--rate", "0")
	require.NoError(t, err)
	assert.Contains(t, out, "applied in 4 group(s)")
	_, err = cli("client", "set-tier", "carol", "free")
	require.NoError(t, err)

	for i, want := range []string{"allowed remaining=1", "allowed remaining=0", "denied remaining=0"} {
		out, err = cli("allow", "carol")
		assert.Contains(t, out, want, "allow #%d", i)
		if strings.HasPrefix(want, "denied") {
			assert.Equal(t, 3, exitCode(err), "a denial exits 3")
		} else {
			assert.NoError(t, err)
		}
	}
	// A reset (once the one-node cluster has raised its version to 2)
	// makes carol's bucket full again.
	require.Eventually(t, func() bool { out, err = cli("client", "reset", "carol"); return err == nil }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, out, "client carol reset: its bucket is full again")
	out, err = cli("allow", "carol")
	require.NoError(t, err)
	assert.Contains(t, out, "allowed remaining=1")

	out, err = cli("tier", "list")
	require.NoError(t, err)
	assert.Regexp(t, `free\s+token_bucket\s+2\s+0/s\s+enforce\s+deny`, out)

	out, err = cli("tier", "set", "hourly", "--algorithm", "sliding_window", "--limit", "3", "--window", "3600", "--mode", "shadow", "--when-unavailable", "allow")
	require.NoError(t, err, out)
	out, err = cli("tier", "list")
	require.NoError(t, err)
	assert.Regexp(t, `hourly\s+sliding_window\s+3\s+per 3600s\s+shadow\s+allow`, out)
	out, err = cli("audit")
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^VERSION\s+TIME \(UTC\)\s+ACTOR\s+OP\s+TIER\s+BEFORE\s+AFTER\s+ON RAISE$`, out)
	assert.Regexp(t, `(?m)^\d+\s+\d{4}-\d\d-\d\dT[0-9:]+Z\s+anonymous\s+tier_set\s+hourly\s+-\s+3 per 3600s shadow when_unavailable=allow\s+keep$`, out)
	out, err = cli("client", "get", "carol")
	require.NoError(t, err)
	assert.Contains(t, out, `"last_reset": {`, "the reset is on carol's record")
	_, err = cli("tier", "set", "hourly", "--algorithm", "sliding_window", "--limit", "3", "--window", "60", "--on-raise", "twice")
	assert.Equal(t, 2, exitCode(err), "a bad --on-raise is a usage error: %v", err)

	_, err = cli("tier", "set", "free", "--capacity", "0", "--rate", "1")
	assert.Equal(t, 2, exitCode(err), "an invalid policy is a usage error: %v", err)
	_, err = cli("tier", "delete", "nope")
	var apiErr *client.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, api.CodeTierNotFound, apiErr.Code)
	assert.Equal(t, 1, exitCode(err))
	_, err = cli("allow")
	assert.Equal(t, 2, exitCode(err), "missing client argument")
	_, err = cli("frobnicate")
	assert.Equal(t, 2, exitCode(err))

	out, err = cli("status", "--json")
	require.NoError(t, err)
	assert.Contains(t, out, `"leader": "node1"`)
	out, err = cli("status")
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^NODE\s+STATE\s+RAFT\s+HTTP`, out)
	assert.Regexp(t, `(?m)^node1\s+alive\s`, out)
	assert.Regexp(t, `(?m)^GROUP\s+LEADER\s+STATE HERE`, out)
	assert.Regexp(t, `(?m)^meta\s+node1\s+Leader\s`, out, "one row per group, the meta group's led here")
	out, err = cli("members")
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^node1\s+alive\s`, out)
	assert.NotContains(t, out, "GROUP")
}

// The API refuses oversized headers instead of buffering up to net/http's
// default megabyte per connection.
func TestServeLimitsHeaderSize(t *testing.T) {
	_, addr, _ := startServe(t, "--data-dir", filepath.Join(t.TempDir(), "d"))
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/healthz", nil)
	require.NoError(t, err)
	// Past the setting and what net/http reads ahead: refused.
	req.Header.Set("X-Padding", strings.Repeat("p", headerRefused))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	// A little under it: served.
	req.Header.Set("X-Padding", strings.Repeat("p", maxHeaderBytes-4<<10))
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "ordinary requests still pass")
}

func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"version"}, &out, io.Discard))
	assert.Equal(t, fmt.Sprintf("quorate %s\ncluster versions %d..%d\n", version.Binary, fsm.BaseClusterVersion, fsm.MaxClusterVersion), out.String())
	assert.Error(t, run(context.Background(), []string{"version", "extra"}, io.Discard, io.Discard))
}
