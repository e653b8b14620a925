//go:build linux

package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// clockBody is the fault-injection build's PUT/GET /debug/clock body.
type clockBody struct {
	OffsetNanos int64 `json:"offset_ns"`
}

// strobe is a running clock strobe.
type strobe struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *strobe) stop() {
	s.cancel()
	<-s.done
}

// setOffset sets node i's clock offset through its debug listener and
// remembers it, with credit as the clock slack the checkers may give it
// (see ClockOffsets).
func (c *Cluster) setOffset(ctx context.Context, i int, off, credit time.Duration) error {
	if _, err := c.node(i); err != nil {
		return err
	}
	body, err := json.Marshal(clockBody{OffsetNanos: int64(off)})
	if err != nil {
		return err
	}
	code, resp, err := c.do(ctx, http.MethodPut, c.DebugURL(i)+"/debug/clock", body, requestTimeout)
	if err != nil {
		return fmt.Errorf("control: %s clock: %w", nodeID(i), err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("control: %s: PUT /debug/clock: %d %s (is the binary built with -tags faultinject?)", nodeID(i), code, bytes.TrimSpace(resp))
	}
	var got clockBody
	if err := json.Unmarshal(resp, &got); err != nil {
		return fmt.Errorf("control: %s: PUT /debug/clock: %w", nodeID(i), err)
	}
	if got.OffsetNanos != int64(off) {
		return fmt.Errorf("control: %s: PUT /debug/clock set %v, node reports %v", nodeID(i), off, time.Duration(got.OffsetNanos))
	}
	c.mu.Lock()
	c.offsets[i] = off
	if credit > c.maxSkew[i] {
		c.maxSkew[i] = credit
	}
	c.mu.Unlock()
	return nil
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// Clock reads node i's current clock offset (GET /debug/clock).
func (c *Cluster) Clock(ctx context.Context, i int) (time.Duration, error) {
	if _, err := c.node(i); err != nil {
		return 0, err
	}
	code, resp, err := c.do(ctx, http.MethodGet, c.DebugURL(i)+"/debug/clock", nil, requestTimeout)
	if err != nil {
		return 0, fmt.Errorf("control: %s clock: %w", nodeID(i), err)
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("control: %s: GET /debug/clock: %d %s", nodeID(i), code, bytes.TrimSpace(resp))
	}
	var got clockBody
	if err := json.Unmarshal(resp, &got); err != nil {
		return 0, fmt.Errorf("control: %s: GET /debug/clock: %w", nodeID(i), err)
	}
	return time.Duration(got.OffsetNanos), nil
}

// SetClock sets node i's clock offset (PUT /debug/clock) and records a
// start event under name. The offset lasts until ResetClocks or until the
// process restarts (a new process starts unskewed).
func (c *Cluster) SetClock(ctx context.Context, name string, i int, offset time.Duration) error {
	if err := c.setOffset(ctx, i, offset, abs(offset)); err != nil {
		return err
	}
	c.recordStart(faultClock, name, map[string]string{"node": nodeID(i), "offset_ns": strconv.FormatInt(int64(offset), 10)})
	c.log.Info("clock skewed", "nemesis", name, "node", nodeID(i), "offset", offset)
	return nil
}

// StrobeClock sets node i's offset to +delta, then flips it between
// +delta and -delta every interval, in a goroutine, until duration has
// passed (0: no limit), ctx is done, or ResetClocks (or Teardown) stops
// it; the last offset set stays until ResetClocks. It returns once the first offset is set, after recording a start
// event under name; a strobe already running is stopped first. Failed
// flips (a paused node) are logged and the strobe goes on.
func (c *Cluster) StrobeClock(ctx context.Context, name string, i int, delta, interval, duration time.Duration) error {
	if delta <= 0 || interval <= 0 {
		return fmt.Errorf("control: strobe: delta and interval must be positive, got %v and %v", delta, interval)
	}
	c.stopStrobe()
	if err := c.setOffset(ctx, i, delta, abs(delta)); err != nil {
		return err
	}
	var sctx context.Context
	var cancel context.CancelFunc
	if duration > 0 {
		sctx, cancel = context.WithTimeout(ctx, duration)
	} else {
		sctx, cancel = context.WithCancel(ctx)
	}
	st := &strobe{cancel: cancel, done: make(chan struct{})}
	c.mu.Lock()
	if c.torn {
		c.mu.Unlock()
		cancel()
		return ErrTornDown
	}
	c.strobe = st
	c.mu.Unlock()
	c.recordStart(faultClock, name, map[string]string{
		"node": nodeID(i), "strobe_delta_ns": strconv.FormatInt(int64(delta), 10), "strobe_interval": interval.String(),
	})
	c.log.Info("clock strobe", "nemesis", name, "node", nodeID(i), "delta", delta, "interval", interval)
	go func() {
		defer close(st.done)
		defer cancel()
		t := time.NewTicker(interval)
		defer t.Stop()
		off := delta
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			off = -off
			if err := c.setOffset(sctx, i, off, abs(off)); err != nil && sctx.Err() == nil {
				c.log.Debug("clock strobe flip failed", "node", nodeID(i), "err", err)
			}
		}
	}()
	return nil
}

func (c *Cluster) stopStrobe() {
	c.mu.Lock()
	st := c.strobe
	c.strobe = nil
	c.mu.Unlock()
	if st != nil {
		st.stop()
	}
}

// MaxClockStep is how far a running node's stamps follow its clock stepping
// forward (MaxClockStep in cluster/clock): a step beyond is held back to it.
const MaxClockStep = time.Second

// SetClockFar steps node i's running clock forward by offset, beyond what
// the clock guard lets stamp, and records a start event under name. The
// node's stamps follow the step by at most MaxClockStep, and only until
// its next clock check marks it off, so that is the slack the checkers get
// for it, not offset.
func (c *Cluster) SetClockFar(ctx context.Context, name string, i int, offset time.Duration) error {
	if err := c.setOffset(ctx, i, offset, min(abs(offset), MaxClockStep)); err != nil {
		return err
	}
	c.recordStart(faultClock, name, map[string]string{"node": nodeID(i), "offset_ns": strconv.FormatInt(int64(offset), 10), "credit": MaxClockStep.String()})
	c.log.Info("clock stepped far ahead", "nemesis", name, "node", nodeID(i), "offset", offset)
	return nil
}

// startOffsetEnv is the environment variable a faultinject binary reads its
// starting clock offset from (cmd/quorate's StartOffsetEnv).
const startOffsetEnv = "FAULT_CLOCK_START_OFFSET"

// StartAhead restarts node i gracefully (SIGTERM, waiting for it to exit)
// with its clock offset by offset from its first instant, as a node whose
// clock was wrong when it started (before NTP synced), and records a start
// event under name. The clock guard must keep such a node from stamping
// anything, so the offset is not counted in ClockOffsets: the checkers give
// it no slack, and a single decision stamped with it fails them.
// ResetClocks sets the offset back to zero while the node runs, as NTP
// would.
func (c *Cluster) StartAhead(ctx context.Context, name string, i int, offset time.Duration) error {
	n, _, err := c.liveProc(i)
	if err != nil {
		return err
	}
	c.recordStart(faultClock, name, map[string]string{"node": n.id, "start_offset_ns": strconv.FormatInt(int64(offset), 10)})
	if err := c.Stop(i); err != nil {
		return err
	}
	c.mu.Lock()
	n.startOffset = offset
	c.mu.Unlock()
	if err := c.Start(ctx, i); err != nil {
		return err
	}
	c.log.Info("node restarted with its clock ahead", "nemesis", name, "node", n.id, "offset", offset)
	return nil
}

// ResetClocks stops a running strobe and sets every running node whose
// offset is not zero back to zero, then records a stop event if a clock
// fault was active.
func (c *Cluster) ResetClocks(ctx context.Context) error {
	c.stopStrobe()
	var errs []error
	var reset []string
	for _, i := range c.skewedRunning() {
		if err := c.setOffset(ctx, i, 0, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		reset = append(reset, nodeID(i))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if c.recordStop(faultClock, map[string]string{"nodes": strings.Join(reset, ",")}) {
		c.log.Info("clocks reset", "nodes", reset)
	}
	return nil
}

// ClockOffsets returns, for every node id, the largest |offset| in
// nanoseconds ever injected into it (0 for a node never skewed).
func (c *Cluster) ClockOffsets() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int64{}
	for i := 1; i <= c.opts.Nodes; i++ {
		out[nodeID(i)] = int64(c.maxSkew[i])
	}
	return out
}

// waitDebug waits (at most 10 s) until every running node with a clock
// offset answers on its debug listener, so that ResetClocks can reach a
// node that has just started.
func (c *Cluster) waitDebug(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, i := range c.skewedRunning() {
		for {
			if _, err := c.Clock(ctx, i); err == nil {
				break
			} else if ctx.Err() != nil {
				return fmt.Errorf("control: %s: debug listener: %w", nodeID(i), err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// skewedRunning returns the running nodes whose clock offset is not zero.
func (c *Cluster) skewedRunning() []int {
	var out []int
	for i := 1; i <= c.opts.Nodes; i++ {
		c.mu.Lock()
		off := c.offsets[i]
		c.mu.Unlock()
		if off != 0 && c.Running(i) {
			out = append(out, i)
		}
	}
	return out
}
