//go:build linux

package control

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// leaveTimeout bounds POST /v1/leave (the node gives itself 30 s).
const leaveTimeout = 40 * time.Second

func nodeList(nodes []int) string {
	ids := make([]string, len(nodes))
	for k, i := range nodes {
		ids[k] = nodeID(i)
	}
	return strings.Join(ids, ",")
}

// KillNodes sends each of nodes SIGKILL, waits until they are gone, and
// records a start event under name (if any was killed).
func (c *Cluster) KillNodes(ctx context.Context, name string, nodes ...int) error {
	var errs []error
	var killed []int
	for _, i := range nodes {
		if err := c.Kill(i); err != nil {
			errs = append(errs, err)
			continue
		}
		killed = append(killed, i)
	}
	if len(killed) > 0 {
		c.recordStart(faultDown, name, map[string]string{"nodes": nodeList(killed), "signal": "KILL"})
	}
	return errors.Join(errs...)
}

// TermNodes stops each of nodes gracefully: SIGTERM, then a wait for the
// process to exit (Stop: SIGKILL after 20 s if it has not), and records a
// start event under name (if any was stopped) with each one's exit status.
// RestartDown starts them again with the same flags on the same data dirs.
func (c *Cluster) TermNodes(ctx context.Context, name string, nodes ...int) error {
	var errs []error
	var stopped []int
	var exits []string
	for _, i := range nodes {
		n, p, err := c.liveProc(i)
		if err == nil {
			err = c.Stop(i)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		stopped = append(stopped, i)
		exit := "0"
		if p.err != nil {
			exit = p.err.Error()
		}
		exits = append(exits, n.id+":"+exit)
	}
	if len(stopped) > 0 {
		c.recordStart(faultDown, name, map[string]string{"nodes": nodeList(stopped), "signal": "TERM", "exit": strings.Join(exits, ",")})
	}
	return errors.Join(errs...)
}

// LeaveNode makes node i leave the cluster gracefully (POST /v1/leave:
// it hands its groups over, is removed as a voter everywhere, and stops),
// waits for its process to exit (SIGTERM after 15 s if it has not), and
// records a start event under name. Its data dir is kept: RestartDown
// starts it again on it, and it rejoins through the other nodes and is
// added back as a voter by placement.
func (c *Cluster) LeaveNode(ctx context.Context, name string, i int) error {
	n, p, err := c.liveProc(i)
	if err != nil {
		return err
	}
	code, body, lerr := c.do(ctx, http.MethodPost, c.NodeURL(i)+"/v1/leave", []byte("{}"), leaveTimeout)
	outcome := "left"
	switch {
	case lerr != nil:
		outcome = lerr.Error()
	case code != http.StatusOK:
		outcome = fmt.Sprintf("%d %s", code, strings.TrimSpace(string(body)))
	}
	if !p.wait(15 * time.Second) {
		c.log.Warn("node still running 15s after leaving; stopping it", "node", n.id)
		if err := c.Stop(i); err != nil {
			return err
		}
	}
	c.recordStart(faultDown, name, map[string]string{"nodes": n.id, "leave": outcome})
	c.log.Info("node left", "nemesis", name, "node", n.id, "outcome", outcome)
	return nil
}

// PauseNodes stops each of nodes with SIGSTOP and records a start event
// under name (if any was paused).
func (c *Cluster) PauseNodes(ctx context.Context, name string, nodes ...int) error {
	var errs []error
	var paused []int
	for _, i := range nodes {
		if err := c.Pause(i); err != nil {
			errs = append(errs, err)
			continue
		}
		paused = append(paused, i)
	}
	if len(paused) > 0 {
		c.recordStart(faultPause, name, map[string]string{"nodes": nodeList(paused), "signal": "STOP"})
	}
	return errors.Join(errs...)
}

// ResumeAll continues every paused node (SIGCONT) and records the stop
// event of the active pause, if any.
func (c *Cluster) ResumeAll(ctx context.Context) error {
	var errs []error
	var resumed []int
	for i := 1; i <= c.opts.Nodes; i++ {
		if !c.Paused(i) {
			continue
		}
		if err := c.Resume(i); err != nil {
			errs = append(errs, err)
			continue
		}
		resumed = append(resumed, i)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.recordStop(faultPause, map[string]string{"nodes": nodeList(resumed)})
	return nil
}

// RestartDown starts every node that is not running (killed, stopped or
// left) on its data dir and records the stop event of the active
// kill or leave, if any. It returns once the processes run, not when they
// are ready (see WaitReady).
func (c *Cluster) RestartDown(ctx context.Context) error {
	var errs []error
	var started []int
	for i := 1; i <= c.opts.Nodes; i++ {
		if c.Running(i) {
			continue
		}
		if err := c.Start(ctx, i); err != nil {
			errs = append(errs, err)
			continue
		}
		started = append(started, i)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.recordStop(faultDown, map[string]string{"nodes": nodeList(started)})
	return nil
}

// Recover undoes every fault: resumes paused nodes, heals partitions,
// starts nodes that are down and resets clocks. Idempotent.
func (c *Cluster) Recover(ctx context.Context) error {
	return errors.Join(c.ResumeAll(ctx), c.Heal(ctx), c.RestartDown(ctx), c.ResetClocks(ctx))
}

// Nemesis is one kind of fault: Start injects it, Stop undoes every fault
// of its kind (so Stop is idempotent and safe to call when Start failed
// half way).
type Nemesis struct {
	Name  string
	Start func(ctx context.Context) error
	Stop  func(ctx context.Context) error
}

// Mix builds the named nemeses (NemesisNames lists the names). It fails on
// an unknown name or one this cluster does not support (see Supports).
// Their Start functions draw nodes from rng, which must not be used
// concurrently: Schedule calls them from one goroutine.
//
//   - kill, kill-leader, kill-minority: SIGKILL one random running node,
//     the leader of Options.LeaderGroup, or (N-1)/2 random running nodes;
//     Stop restarts every node that is down (same data dir).
//   - pause: SIGSTOP one random node; Stop sends SIGCONT to all paused.
//   - partition-one, partition-leader, partition-halves, partition-ring,
//     partition-bridge: Isolate a random node or the leader, Halves,
//     Ring or Bridge over a random order of the nodes; Stop heals.
//   - clock-bump: one random node's offset to +D or -D (Options.ClockSkew);
//     clock-strobe: one random node flips between +D and -D every
//     Options.StrobeInterval; Stop resets every offset to 0.
//   - clock-jump-ahead: one random running node's clock steps
//     Options.FarClockOffset forward (SetClockFar: slack MaxClockStep, what
//     its stamps can follow before the guard stops it); Stop resets it.
//   - clock-restart-ahead: one random node is stopped gracefully and
//     started again with its clock Options.FarClockOffset ahead from its
//     first instant (StartAhead: no slack for the checkers); Stop sets it
//     back to 0 while the node runs.
//   - leave-rejoin: one random node leaves gracefully and stops; Stop
//     starts it again on the same data dir, and it rejoins.
//   - term-leader: the leader of a random data group is stopped gracefully
//     (SIGTERM, waiting for it to exit, see TermNodes); Stop restarts every
//     node that is down, with the same flags on the same data dir.
//   - upgrade-roll: once every node is ready, one random node still on
//     Options.Binary is stopped gracefully, as term-leader does; Stop starts it again on
//     Options.UpgradeBinary, same flags and data dir. Once every node is
//     upgraded it does nothing.
func (c *Cluster) Mix(rng *rand.Rand, names ...string) ([]Nemesis, error) {
	var out []Nemesis
	var bad []string
	for _, name := range names {
		nm, ok := c.nemesis(rng, name)
		if !ok {
			bad = append(bad, fmt.Sprintf("%q (unknown)", name))
			continue
		}
		if !c.Supports(name) {
			bad = append(bad, fmt.Sprintf("%q (unsupported here)", name))
			continue
		}
		out = append(out, nm)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("control: nemeses %s; known: %s", strings.Join(bad, ", "), strings.Join(NemesisNames(), " "))
	}
	return out, nil
}

func (c *Cluster) allNodes() []int {
	var out []int
	for i := 1; i <= c.opts.Nodes; i++ {
		out = append(out, i)
	}
	return out
}

func shuffled(rng *rand.Rand, xs []int) []int {
	out := slices.Clone(xs)
	rng.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

// pick returns k distinct random elements of xs.
func pick(rng *rand.Rand, xs []int, k int) ([]int, error) {
	if k > len(xs) || k < 1 {
		return nil, fmt.Errorf("control: need %d node(s), %d available", k, len(xs))
	}
	return shuffled(rng, xs)[:k], nil
}

func (c *Cluster) leader(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.waitLeader(ctx, c.opts.LeaderGroup)
}

func (c *Cluster) nemesis(rng *rand.Rand, name string) (Nemesis, bool) {
	nm := Nemesis{Name: name}
	reachable := func(k int) ([]int, error) { return pick(rng, c.reachable(), k) }
	switch name {
	case NemKill, NemKillLeader, NemKillMinority:
		nm.Start = func(ctx context.Context) error {
			var nodes []int
			var err error
			switch name {
			case NemKill:
				nodes, err = reachable(1)
			case NemKillMinority:
				nodes, err = reachable((c.opts.Nodes - 1) / 2)
			default:
				var l int
				l, err = c.leader(ctx)
				nodes = []int{l}
			}
			if err != nil {
				return err
			}
			return c.KillNodes(ctx, name, nodes...)
		}
		nm.Stop = c.RestartDown
	case NemPause:
		nm.Start = func(ctx context.Context) error {
			nodes, err := reachable(1)
			if err != nil {
				return err
			}
			return c.PauseNodes(ctx, name, nodes...)
		}
		nm.Stop = c.ResumeAll
	case NemPartitionOne, NemPartitionLeader, NemPartitionHalves, NemPartitionRing, NemPartitionBridge:
		nm.Start = func(ctx context.Context) error {
			order := shuffled(rng, c.allNodes())
			var g Grudge
			var err error
			switch name {
			case NemPartitionOne:
				g = Isolate(order, order[0])
			case NemPartitionLeader:
				var l int
				if l, err = c.leader(ctx); err == nil {
					g = Isolate(order, l)
				}
			case NemPartitionHalves:
				g = Complete(Halves(order))
			case NemPartitionRing:
				g, err = Ring(order)
			default:
				g = Bridge(order)
			}
			if err != nil {
				return err
			}
			return c.Partition(ctx, name, g)
		}
		nm.Stop = c.Heal
	case NemClockBump, NemClockStrobe:
		nm.Start = func(ctx context.Context) error {
			nodes, err := reachable(1)
			if err != nil {
				return err
			}
			if name == NemClockStrobe {
				return c.StrobeClock(ctx, name, nodes[0], c.opts.ClockSkew, c.opts.StrobeInterval, 0)
			}
			off := c.opts.ClockSkew
			if rng.IntN(2) == 0 {
				off = -off
			}
			return c.SetClock(ctx, name, nodes[0], off)
		}
		nm.Stop = c.ResetClocks
	case NemClockJumpAhead:
		nm.Start = func(ctx context.Context) error {
			nodes, err := reachable(1)
			if err != nil {
				return err
			}
			return c.SetClockFar(ctx, name, nodes[0], c.opts.FarClockOffset)
		}
		nm.Stop = c.ResetClocks
	case NemClockRestartAhead:
		nm.Start = func(ctx context.Context) error {
			nodes, err := reachable(1)
			if err != nil {
				return err
			}
			return c.StartAhead(ctx, name, nodes[0], c.opts.FarClockOffset)
		}
		nm.Stop = func(ctx context.Context) error {
			// The node may still be starting: wait for its debug listener.
			return errors.Join(c.RestartDown(ctx), c.waitDebug(ctx), c.ResetClocks(ctx))
		}
	case NemTermLeader:
		nm.Start = func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			l, err := c.waitLeader(ctx, strconv.Itoa(rng.IntN(c.groups)))
			if err != nil {
				return err
			}
			return c.TermNodes(ctx, name, l)
		}
		nm.Stop = c.RestartDown
	case NemUpgradeRoll:
		nm.Start = func(ctx context.Context) error {
			var old []int
			c.mu.Lock()
			for _, n := range c.nodes {
				if !n.upgraded {
					old = append(old, n.index)
				}
			}
			c.mu.Unlock()
			if len(old) == 0 {
				return nil
			}
			// As an operator would: the node upgraded last serves before
			// the next one stops.
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := c.WaitReady(rctx)
			cancel()
			if err != nil {
				return fmt.Errorf("control: upgrade-roll: the cluster is not ready for the next node: %w", err)
			}
			i := shuffled(rng, old)[0]
			c.mu.Lock()
			c.nodes[i-1].upgraded = true
			c.mu.Unlock()
			return c.TermNodes(ctx, name, i)
		}
		nm.Stop = c.RestartDown
	case NemLeaveRejoin:
		nm.Start = func(ctx context.Context) error {
			nodes, err := reachable(1)
			if err != nil {
				return err
			}
			return c.LeaveNode(ctx, name, nodes[0])
		}
		nm.Stop = c.RestartDown
	default:
		return nm, false
	}
	return nm, true
}

// stopTimeout bounds each Stop that Schedule runs, even after ctx is done.
const stopTimeout = 2 * time.Minute

// Schedule runs faults for duration: it starts a random nemesis, waits
// interval, stops it, waits interval, and again, until duration has passed
// or ctx is done. Then it calls every nemesis's Stop once more, so the
// cluster ends healed, resumed, unskewed and with every node running
// (Stops run even when ctx is done, each within 2 minutes). record, if
// not nil, gets a start and a stop event per round (with Detail["error"]
// when a step failed); the Cluster's Events hold the details. It returns
// the errors of the final Stops: a failed Start is only recorded.
func Schedule(ctx context.Context, nemeses []Nemesis, interval, duration time.Duration, rng *rand.Rand, record func(Event)) error {
	if len(nemeses) == 0 {
		return errors.New("control: schedule: no nemeses")
	}
	emit := func(name, phase string, err error) {
		if record == nil {
			return
		}
		e := Event{Time: time.Now().UnixNano(), Name: name, Phase: phase}
		if err != nil {
			e.Detail = map[string]string{"error": err.Error()}
		}
		record(e)
	}
	stop := func(nm Nemesis) error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		return nm.Stop(sctx)
	}
	deadline := time.Now().Add(duration)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		nm := nemeses[rng.IntN(len(nemeses))]
		emit(nm.Name, PhaseStart, nm.Start(ctx))
		sleep(ctx, interval)
		emit(nm.Name, PhaseStop, stop(nm))
		if rest := time.Until(deadline); rest > 0 {
			sleep(ctx, min(interval, rest))
		}
	}
	var errs []error
	var done []string
	for _, nm := range nemeses {
		if slices.Contains(done, nm.Name) {
			continue
		}
		done = append(done, nm.Name)
		if err := stop(nm); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", nm.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("control: schedule: final recovery: %w", err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
