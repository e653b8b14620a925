//go:build linux

package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one node process started by this Cluster. Wait runs in its own
// goroutine, so the process is reaped as soon as it exits.
type proc struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // Wait's result; read only after done is closed
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig through os.Process, which holds a pidfd: it never
// reaches another process that reused the PID.
func (p *proc) signal(sig syscall.Signal) error {
	err := p.cmd.Process.Signal(sig)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// wait reports whether the process exited within timeout.
func (p *proc) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// kill sends SIGKILL and waits up to timeout for the process to be reaped.
func (p *proc) kill(timeout time.Duration) error {
	if p.pid <= 0 || p.exited() { // pid <= 0: a Start that has not spawned yet
		return nil
	}
	if err := p.signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill pid %d: %w", p.pid, err)
	}
	if !p.wait(timeout) {
		return fmt.Errorf("pid %d still alive %v after SIGKILL", p.pid, timeout)
	}
	return nil
}

// spawner starts processes from one goroutine locked to its OS thread.
// PR_SET_PDEATHSIG fires when the thread that forked the child exits, not
// the process; a dedicated thread that lives until Teardown makes "the
// harness died" the only way it fires early.
type spawner struct {
	mu     sync.Mutex
	reqs   chan spawnReq
	closed bool
}

type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

func (s *spawner) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrTornDown
	}
	if s.reqs == nil {
		s.reqs = make(chan spawnReq)
		go spawnLoop(s.reqs)
	}
	r := spawnReq{cmd: cmd, reply: make(chan error, 1)}
	s.reqs <- r
	return <-r.reply
}

// spawnLoop never unlocks its thread: when reqs is closed the goroutine
// returns and the runtime ends the thread.
func spawnLoop(reqs <-chan spawnReq) {
	runtime.LockOSThread()
	for r := range reqs {
		r.reply <- r.cmd.Start()
	}
}

func (s *spawner) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		if s.reqs != nil {
			close(s.reqs)
		}
	}
}

// command returns node i's argv. bootstrap leaves out --join (node 1 on a
// fresh data dir); every other start joins all the other nodes.
func (c *Cluster) command(i int, bootstrap bool) []string {
	ip := c.nodeIP(i)
	hp := func(port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
	var argv []string
	if c.useNS {
		argv = append(argv, "ip", "netns", "exec", c.NodeNS(i))
	}
	argv = append(argv, c.binary(i), "serve",
		"--node-id", nodeID(i),
		"--data-dir", c.DataDir(i),
		"--http-addr", hp(HTTPPort),
		"--raft-addr", hp(RaftPort),
		"--gossip-addr", hp(GossipPort),
		"--debug-addr", hp(DebugPort),
		"--auth-file", c.AuthFile(),
	)
	if !bootstrap {
		var join []string
		for j := 1; j <= c.opts.Nodes; j++ {
			if j != i {
				join = append(join, net.JoinHostPort(c.nodeIP(j), strconv.Itoa(GossipPort)))
			}
		}
		argv = append(argv, "--join", strings.Join(join, ","))
	}
	argv = append(argv, c.securityArgs(i)...)
	return append(argv, c.opts.ExtraArgs...)
}

// binary is the quorate binary node i starts on: Options.Binary, or
// Options.UpgradeBinary once upgrade-roll picked it.
func (c *Cluster) binary(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i-1].upgraded {
		return c.opts.UpgradeBinary
	}
	return c.opts.Binary
}

// UpgradedAt returns when node i first started on Options.UpgradeBinary
// (zero: it has not).
func (c *Cluster) UpgradedAt(i int) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i-1].upgradedAt
}

// CertsDir is where Setup writes the cluster's certificates and gossip key.
func (c *Cluster) CertsDir() string { return filepath.Join(c.opts.WorkDir, "certs") }

// securityArgs returns node i's cluster security flags.
func (c *Cluster) securityArgs(i int) []string {
	if c.opts.Insecure {
		return []string{"--insecure"}
	}
	dir, id := c.CertsDir(), nodeID(i)
	return []string{
		"--cluster-ca", filepath.Join(dir, "ca.pem"),
		"--cluster-cert", filepath.Join(dir, id+".pem"),
		"--cluster-key", filepath.Join(dir, id+"-key.pem"),
		"--gossip-key", filepath.Join(dir, "gossip.key"),
	}
}

// writeCerts runs `quorate certs init` for every node into CertsDir, once.
func (c *Cluster) writeCerts(ctx context.Context) error {
	if c.opts.Insecure {
		return nil
	}
	if _, err := os.Stat(filepath.Join(c.CertsDir(), "ca.pem")); err == nil {
		return nil
	}
	var nodes, hosts []string
	for i := 1; i <= c.opts.Nodes; i++ {
		nodes = append(nodes, nodeID(i))
		hosts = append(hosts, nodeID(i)+"="+c.nodeIP(i))
	}
	cmd := exec.CommandContext(ctx, c.opts.Binary, "certs", "init", "--dir", c.CertsDir(),
		"--nodes", strings.Join(nodes, ","), "--hosts", strings.Join(hosts, ","))
	cmd.Env = nodeEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("control: certs init: %w\n%s", err, out)
	}
	return nil
}

// hasState reports whether dir holds a node's state from an earlier start.
func hasState(dir string) bool {
	for _, f := range []string{"quorate.json", filepath.Join("groups", "meta", "raft.db")} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// nodeEnv is the harness's environment without QUORATE_* variables, which
// serve would read for flags not on its command line.
func nodeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUORATE_") {
			env = append(env, kv)
		}
	}
	return env
}

// Start starts node i: `ip netns exec <prefix>-nI <binary> serve ...`
// (see command), output appended to LogPath(i). Node 1 bootstraps the
// cluster when its data dir is fresh; every other start joins the other
// nodes. It returns once /proc/PID/cmdline shows the quorate binary (ip
// netns exec execs it, so the PID is the node's), not when the node is
// ready: see WaitReady. ErrRunning if the node is running already.
func (c *Cluster) Start(ctx context.Context, i int) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	c.mu.Lock()
	switch {
	case c.torn:
		c.mu.Unlock()
		return ErrTornDown
	case n.proc != nil && !n.proc.exited():
		c.mu.Unlock()
		return fmt.Errorf("control: %s (pid %d): %w", n.id, n.proc.pid, ErrRunning)
	}
	// Claim the slot so that a concurrent Start of the same node fails.
	claim := &proc{pid: -1, done: make(chan struct{})}
	n.proc = claim
	c.mu.Unlock()

	p, err := c.spawn(i)
	c.mu.Lock()
	if err != nil {
		n.proc = nil
		c.mu.Unlock()
		return err
	}
	n.proc, n.paused = p, false
	if n.upgraded && n.upgradedAt.IsZero() {
		n.upgradedAt = time.Now()
	}
	// A new process starts unskewed, or at the offset StartAhead asked for
	// (not counted in maxSkew: see StartAhead).
	c.offsets[i], n.startOffset = n.startOffset, 0
	torn := c.torn
	c.mu.Unlock()
	if torn {
		_ = p.kill(10 * time.Second)
		return ErrTornDown
	}
	if err := c.verifyExec(ctx, n, p); err != nil {
		_ = p.kill(10 * time.Second)
		return err
	}
	c.log.Info("node started", "node", n.id, "pid", p.pid, "ns", c.NodeNS(i))
	return nil
}

func (c *Cluster) spawn(i int) (*proc, error) {
	id := nodeID(i)
	if err := os.MkdirAll(c.DataDir(i), 0o755); err != nil {
		return nil, fmt.Errorf("control: %s data dir: %w", id, err)
	}
	bootstrap := i == 1 && !hasState(c.DataDir(i))
	argv := c.command(i, bootstrap)
	logf, err := os.OpenFile(c.LogPath(i), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("control: %s log: %w", id, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== control: %s starting %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = nodeEnv()
	c.mu.Lock()
	if off := c.nodes[i-1].startOffset; off != 0 {
		cmd.Env = append(cmd.Env, startOffsetEnv+"="+off.String())
	}
	c.mu.Unlock()
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: a Ctrl-C at the terminal reaches the harness
	// (which tears down), not the nodes directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.spawner.start(cmd); err != nil {
		if errors.Is(err, ErrTornDown) {
			return nil, err
		}
		return nil, fmt.Errorf("control: start %s: %w", id, err)
	}
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// verifyExec waits until the process's argv[0] is the quorate binary.
func (c *Cluster) verifyExec(ctx context.Context, n *node, p *proc) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		argv := readCmdline(p.pid)
		if p.exited() {
			return fmt.Errorf("control: %s exited at once (%v); %s ends with:\n%s", n.id, p.err, c.LogPath(n.index), tailFile(c.LogPath(n.index), 15))
		}
		if len(argv) > 1 && argv[0] == c.binary(n.index) && argv[1] == "serve" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("control: %s pid %d: cmdline is %q, not the quorate binary", n.id, p.pid, argv)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// tailFile returns the last n lines of the file at path.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return lastLines(b, n)
}

// liveProc returns node i's process if it is running.
func (c *Cluster) liveProc(i int) (*node, *proc, error) {
	n, err := c.node(i)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.proc == nil || n.proc.pid <= 0 || n.proc.exited() {
		return n, nil, fmt.Errorf("control: %s: %w", n.id, ErrNotRunning)
	}
	return n, n.proc, nil
}

// Running reports whether node i has a live process (paused or not).
func (c *Cluster) Running(i int) bool {
	_, _, err := c.liveProc(i)
	return err == nil
}

// Paused reports whether node i is running and stopped with SIGSTOP.
func (c *Cluster) Paused(i int) bool {
	n, _, err := c.liveProc(i)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.paused
}

// PID is node i's process id, 0 if it is not running.
func (c *Cluster) PID(i int) int {
	_, p, err := c.liveProc(i)
	if err != nil {
		return 0
	}
	return p.pid
}

// Kill sends node i SIGKILL and waits until the process is gone.
func (c *Cluster) Kill(i int) error {
	n, p, err := c.liveProc(i)
	if err != nil {
		return err
	}
	if err := p.kill(10 * time.Second); err != nil {
		return fmt.Errorf("control: %s: %w", n.id, err)
	}
	c.mu.Lock()
	n.paused = false
	c.mu.Unlock()
	c.log.Info("node killed", "node", n.id, "pid", p.pid)
	return nil
}

// Stop sends node i SIGTERM (and SIGCONT, in case it is paused) and waits
// up to 20 s for it to shut down gracefully, then kills it.
func (c *Cluster) Stop(i int) error {
	n, p, err := c.liveProc(i)
	if err != nil {
		return err
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("control: %s: %w", n.id, err)
	}
	_ = p.signal(syscall.SIGCONT)
	if !p.wait(20 * time.Second) {
		c.log.Warn("node did not stop within 20s of SIGTERM; killing it", "node", n.id, "pid", p.pid)
		if err := p.kill(10 * time.Second); err != nil {
			return fmt.Errorf("control: %s: %w", n.id, err)
		}
	}
	c.mu.Lock()
	n.paused = false
	c.mu.Unlock()
	c.log.Info("node stopped", "node", n.id, "pid", p.pid)
	return nil
}

// Pause stops node i with SIGSTOP and returns once the kernel shows it
// stopped.
func (c *Cluster) Pause(i int) error {
	n, p, err := c.liveProc(i)
	if err != nil {
		return err
	}
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("control: %s: %w", n.id, err)
	}
	c.mu.Lock()
	n.paused = true
	c.mu.Unlock()
	deadline := time.Now().Add(2 * time.Second)
	for procState(p.pid) != 'T' && !p.exited() {
		if time.Now().After(deadline) {
			return fmt.Errorf("control: %s pid %d not stopped 2s after SIGSTOP", n.id, p.pid)
		}
		time.Sleep(time.Millisecond)
	}
	c.log.Info("node paused", "node", n.id, "pid", p.pid)
	return nil
}

// Resume continues node i with SIGCONT; a node that is not paused is left
// alone.
func (c *Cluster) Resume(i int) error {
	n, p, err := c.liveProc(i)
	if err != nil {
		return err
	}
	c.mu.Lock()
	paused := n.paused
	n.paused = false
	c.mu.Unlock()
	if !paused {
		return nil
	}
	if err := p.signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("control: %s: %w", n.id, err)
	}
	c.log.Info("node resumed", "node", n.id, "pid", p.pid)
	return nil
}

// Restart kills node i (if it runs) and starts it again on the same data dir.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if err := c.Kill(i); err != nil && !errors.Is(err, ErrNotRunning) {
		return err
	}
	return c.Start(ctx, i)
}

// StartAll starts every node that is not running. When node 1 bootstraps
// (fresh data dir) it waits for node 1 to answer /readyz before starting
// the others. It does not wait for the cluster to be ready: see WaitReady.
func (c *Cluster) StartAll(ctx context.Context) error {
	first := 1
	if !c.Running(1) && !hasState(c.DataDir(1)) {
		if err := c.Start(ctx, 1); err != nil {
			return err
		}
		if err := c.waitNodeReady(ctx, 1); err != nil {
			return err
		}
		first = 2
	}
	for i := first; i <= c.opts.Nodes; i++ {
		if c.Running(i) {
			continue
		}
		if err := c.Start(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// procState returns the state letter of /proc/pid/stat (0 if gone).
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0
	}
	return s[i+2]
}
