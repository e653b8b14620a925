//go:build faultinject

package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/internal/freeport"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFaultBuildNeedsDebugAddr(t *testing.T) {
	err := run(context.Background(), []string{"serve", "--data-dir", t.TempDir()}, &bytes.Buffer{}, &bytes.Buffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fault injection")
}

func TestFaultBuildSkewsTheClock(t *testing.T) {
	debug := freeport.Addr(t)
	c, _, _ := startServe(t, "--data-dir", filepath.Join(t.TempDir(), "d"), "--debug-addr", debug)
	ctx := context.Background()

	before, err := c.Allow(ctx, "skewed", 0, "")
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPut, "http://"+debug+"/debug/clock", strings.NewReader(`{"offset_ns": 3600000000000}`))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	after, err := c.Allow(ctx, "skewed", 0, "")
	require.NoError(t, err)
	// A step of a running node's clock is held to clock.MaxClockStep, as
	// a real wall clock's step is: the stamps move by about that, not by
	// the hour.
	// The held-back stamps follow the monotonic clock from the anchor, and
	// the machine's wall clock may slew against it meanwhile (NTP moves it
	// by up to 500 ppm): allow a few milliseconds below the step (a run
	// measured 999.7 ms).
	skew := time.Duration(after.StampUnixNano - before.StampUnixNano)
	assert.GreaterOrEqual(t, skew, clock.MaxClockStep-10*time.Millisecond, "decisions are stamped with the stepped clock, held back")
	assert.Less(t, skew, clock.MaxClockStep+time.Minute, "the hour's step is held to MaxClockStep")
}
