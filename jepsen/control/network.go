//go:build linux

package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Setup creates WorkDir and the nodes' auth file (auth.go) and, with
// namespaces, the network: the namespaces
// <prefix>-br (bridge br0, up), <prefix>-client and <prefix>-n1..nN, one
// veth pair from each into the bridge namespace, the addresses, and every
// loopback up. It installs iptables with apt-get if it is missing. It fails
// if one of its namespaces exists already (see CleanupStale) and removes
// what it created when it fails. Without namespaces it checks that nothing
// listens on the nodes' loopback addresses.
func (c *Cluster) Setup(ctx context.Context) error {
	c.mu.Lock()
	torn := c.torn
	c.mu.Unlock()
	if torn {
		return ErrTornDown
	}
	if err := os.MkdirAll(c.opts.WorkDir, 0o755); err != nil {
		return fmt.Errorf("control: work dir: %w", err)
	}
	if err := c.makeToken(ctx); err != nil {
		return err
	}
	if err := c.writeCerts(ctx); err != nil {
		return err
	}
	if !c.useNS {
		return c.checkLoopbackFree()
	}
	if err := ensureIptables(ctx, c.log); err != nil {
		return err
	}
	existing, err := listNetns(ctx)
	if err != nil {
		return err
	}
	for _, ns := range c.namespaces() {
		if slices.Contains(existing, ns) {
			return fmt.Errorf("control: network namespace %s already exists (left by an earlier run? control.CleanupStale(ctx, %q) removes it)", ns, c.opts.Prefix)
		}
	}
	if err := c.createNetwork(ctx); err != nil {
		if derr := c.deleteNamespaces(context.WithoutCancel(ctx)); derr != nil {
			err = errors.Join(err, derr)
		}
		return err
	}
	c.log.Info("network ready", "bridge", c.BridgeNS(), "client", c.ClientNS()+"="+c.ClientIP(), "nodes", c.opts.Nodes)
	return nil
}

// namespaces lists this cluster's namespaces in the order Setup creates
// them (Teardown deletes them in the reverse order).
func (c *Cluster) namespaces() []string {
	out := []string{c.BridgeNS(), c.ClientNS()}
	for i := 1; i <= c.opts.Nodes; i++ {
		out = append(out, c.NodeNS(i))
	}
	return out
}

// networkCommands returns the ip commands (arguments after "ip") that
// build the network once the namespaces exist.
func (c *Cluster) networkCommands() [][]string {
	br := c.BridgeNS()
	cmds := [][]string{
		{"-n", br, "link", "set", "lo", "up"},
		{"-n", br, "link", "add", "br0", "type", "bridge"},
		{"-n", br, "link", "set", "br0", "up"},
	}
	type member struct{ ns, veth, ip string }
	members := []member{{c.ClientNS(), "v-client", c.ClientIP()}}
	for i := 1; i <= c.opts.Nodes; i++ {
		members = append(members, member{c.NodeNS(i), "v-" + nodeID(i), c.nodeIP(i)})
	}
	for _, m := range members {
		cmds = append(cmds,
			[]string{"-n", br, "link", "add", m.veth, "type", "veth", "peer", "name", "eth0", "netns", m.ns},
			[]string{"-n", br, "link", "set", m.veth, "master", "br0"},
			[]string{"-n", br, "link", "set", m.veth, "up"},
			[]string{"-n", m.ns, "addr", "add", m.ip + "/24", "dev", "eth0"},
			[]string{"-n", m.ns, "link", "set", "eth0", "up"},
			[]string{"-n", m.ns, "link", "set", "lo", "up"},
		)
	}
	return cmds
}

func (c *Cluster) createNetwork(ctx context.Context) error {
	for _, ns := range c.namespaces() {
		if err := runIP(ctx, "netns", "add", ns); err != nil {
			return err
		}
	}
	for _, args := range c.networkCommands() {
		if err := runIP(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// deleteNamespaces deletes whichever of this cluster's namespaces exist.
func (c *Cluster) deleteNamespaces(ctx context.Context) error {
	existing, err := listNetns(ctx)
	if err != nil {
		return err
	}
	var errs []error
	names := c.namespaces()
	slices.Reverse(names)
	for _, ns := range names {
		if slices.Contains(existing, ns) {
			errs = append(errs, runIP(ctx, "netns", "delete", ns))
		}
	}
	return errors.Join(errs...)
}

// checkLoopbackFree fails if something listens on a node's address
// already (another cluster on 127.0.0.1N).
func (c *Cluster) checkLoopbackFree() error {
	for i := 1; i <= c.opts.Nodes; i++ {
		for _, port := range []int{HTTPPort, RaftPort, GossipPort, DebugPort} {
			addr := net.JoinHostPort(c.nodeIP(i), strconv.Itoa(port))
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("control: %s is not free (another cluster running?): %w", addr, err)
			}
			ln.Close()
		}
	}
	return nil
}

// Teardown kills every node process this Cluster started (SIGKILL, by
// PID, then waits for it), stops a running clock strobe, and deletes this
// cluster's namespaces by name. It is idempotent, and after it the Cluster
// starts nothing more. WorkDir (data and logs) is left for inspection.
func (c *Cluster) Teardown(ctx context.Context) error {
	c.mu.Lock()
	c.torn = true
	st := c.strobe
	c.strobe = nil
	var procs []*proc
	for _, n := range c.nodes {
		if n.proc != nil {
			procs = append(procs, n.proc)
		}
		n.paused = false
	}
	c.mu.Unlock()

	var errs []error
	if st != nil {
		st.stop()
	}
	for _, p := range procs {
		if err := p.kill(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	c.spawner.close()
	c.http.CloseIdleConnections()
	if c.useNS {
		errs = append(errs, c.deleteNamespaces(context.WithoutCancel(ctx)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("control: teardown: %w", err)
	}
	return nil
}

// TeardownOnSignal runs Teardown when the process receives SIGINT or
// SIGTERM, then delivers the signal again to the process's other handlers,
// or with its default action if it has none (so the process ends as it
// would have). Call the returned function to stop
// watching, e.g. deferred right after Setup.
func (c *Cluster) TeardownOnSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	quit := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case sig := <-ch:
			c.log.Warn("signal: tearing the cluster down", "signal", sig)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := c.Teardown(ctx); err != nil {
				c.log.Error("teardown", "err", err)
			}
			cancel()
			// Without our channel the signal goes to the process's other
			// handlers, or takes its default action if there are none.
			signal.Stop(ch)
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		case <-quit:
		}
	}()
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(quit)
		})
	}
}

// CleanupStale removes what a crashed earlier run with this prefix left
// behind: in every namespace named <prefix>-nI it kills (SIGKILL, by PID)
// the quorate serve processes that `ip netns pids` lists, then it deletes
// every namespace named <prefix>-nI, <prefix>-client and <prefix>-br. It
// returns the namespaces it deleted. Never run it while a harness with the
// same prefix is running.
func CleanupStale(ctx context.Context, prefix string) ([]string, error) {
	if !prefixRE.MatchString(prefix) {
		return nil, fmt.Errorf("control: prefix %q: want 1 to 8 of a-z and 0-9, starting with a letter", prefix)
	}
	existing, err := listNetns(ctx)
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`^` + prefix + `-(br|client|n[0-9]+)$`)
	var stale []string
	for _, ns := range existing {
		if re.MatchString(ns) {
			stale = append(stale, ns)
		}
	}
	// Nodes first, the bridge last.
	rank := func(ns string) int {
		switch {
		case strings.HasSuffix(ns, "-br"):
			return 2
		case strings.HasSuffix(ns, "-client"):
			return 1
		}
		return 0
	}
	slices.SortStableFunc(stale, func(a, b string) int { return rank(a) - rank(b) })

	var errs []error
	var removed []string
	for _, ns := range stale {
		if rank(ns) == 0 {
			if err := killStaleNodes(ctx, ns); err != nil {
				errs = append(errs, err)
			}
		}
		if err := runIP(ctx, "netns", "delete", ns); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, ns)
	}
	return removed, errors.Join(errs...)
}

// killStaleNodes kills the quorate serve processes in namespace ns and
// waits up to 5 s for them to go.
func killStaleNodes(ctx context.Context, ns string) error {
	out, err := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output()
	if err != nil {
		return fmt.Errorf("control: ip netns pids %s: %w", ns, err)
	}
	var killed []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 1 || pid == os.Getpid() {
			continue
		}
		if !isServeCmdline(readCmdline(pid)) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			killed = append(killed, pid)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range killed {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			return fmt.Errorf("control: stale node pid %d in %s did not die", pid, ns)
		}
	}
	return nil
}

// isServeCmdline reports whether argv is a quorate node's: a serve command
// with --node-id.
func isServeCmdline(argv []string) bool {
	return len(argv) > 1 && slices.Contains(argv, "serve") && slices.Contains(argv, "--node-id")
}

// readCmdline returns /proc/pid/cmdline split at NULs (nil if the process
// is gone).
func readCmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	st := procState(pid)
	return st != 0 && st != 'Z'
}

// listNetns returns the names `ip netns list` shows.
func listNetns(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("control: ip netns list: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// runIP runs ip with args and returns an error that includes its output.
func runIP(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("control: ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Exec runs `ip netns exec ns args...` (just args when ns is "") and
// returns an error that includes the command's output if it fails. It works
// from any namespace: ns is a name.
func (c *Cluster) Exec(ctx context.Context, ns string, args ...string) error {
	_, err := c.ExecOutput(ctx, ns, args...)
	return err
}

// ExecOutput is Exec returning the command's standard output.
func (c *Cluster) ExecOutput(ctx context.Context, ns string, args ...string) ([]byte, error) {
	return execIn(ctx, ns, nil, args...)
}

func execIn(ctx context.Context, ns string, stdin []byte, args ...string) ([]byte, error) {
	if len(args) == 0 {
		return nil, errors.New("control: exec: no command")
	}
	argv := args
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("control: %s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// ensureIptables installs Debian's iptables package with apt-get when
// iptables or iptables-restore is not on PATH.
func ensureIptables(ctx context.Context, log *slog.Logger) error {
	have := func() bool {
		_, e1 := exec.LookPath("iptables")
		_, e2 := exec.LookPath("iptables-restore")
		return e1 == nil && e2 == nil
	}
	if have() {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("control: iptables is not installed and there is no apt-get to install it; install iptables (with iptables-restore) and retry")
	}
	// Test packages run at once (go test ./...), and two apt-gets at once
	// fail on apt's own lock: one process installs, the others wait for it
	// and find iptables there.
	unlock, err := lockFile(ctx, filepath.Join(os.TempDir(), "quorate-apt-install.lock"))
	if err != nil {
		return fmt.Errorf("control: iptables is not installed: %w", err)
	}
	defer unlock()
	if have() {
		return nil
	}
	log.Info("iptables not found; installing it with apt-get")
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "iptables"}} {
		args = append([]string{"-o", "DPkg::Lock::Timeout=300"}, args...) // someone else's apt-get
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("control: iptables is not installed and apt-get %s failed (install iptables by hand): %w: %s",
				strings.Join(args, " "), err, lastLines(out, 5))
		}
	}
	if !have() {
		return errors.New("control: apt-get installed iptables but iptables or iptables-restore is still not on PATH")
	}
	return nil
}

// lockFile takes an exclusive lock on the file at path (made if missing),
// waiting for other processes that hold it until ctx ends.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lastLines returns the last n lines of b, trimmed.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
