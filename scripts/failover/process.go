package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// checkPID reads n's pid file and makes sure that pid is a live quorate
// serving as n, so a recycled pid is never killed.
func checkPID(n node) (int, error) {
	raw, err := os.ReadFile(n.pidFile)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s: bad pid %q", n.pidFile, bytes.TrimSpace(raw))
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return 0, fmt.Errorf("%s: pid %d is not alive: %w", n.id, pid, err)
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, fmt.Errorf("%s: cannot check pid %d: %w", n.id, pid, err)
	}
	args := strings.Split(string(cmd), "\x00")
	if !slices.Contains(args, "serve") || !slices.Contains(args, n.id) || !strings.Contains(filepath.Base(args[0]), "quorate") {
		return 0, fmt.Errorf("%s: pid %d is not quorate serve --node-id %s: %q", n.id, pid, n.id, strings.Join(args, " "))
	}
	return pid, nil
}

// waitGone waits until pid has exited (or is a zombie).
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// pid (comm) S ...: the state follows the last ')'.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitReaped waits until pid no longer exists at all (not even a zombie).
func waitReaped(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// restart starts the killed node again with the cluster script.
func (t *tool) restart(id string) error {
	n, ok := t.byID(id)
	if !ok {
		return fmt.Errorf("unknown node %q", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", t.c.script, "start", strconv.Itoa(n.num))
	cmd.Env = append(os.Environ(), "QUORATE_CLUSTER_DIR="+t.c.dir)
	cmd.Stdout, cmd.Stderr = t.log, t.log
	// Its own process group: a Ctrl-C in the terminal must not stop the
	// script between starting the node and writing its pid file.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s start %d: %w", t.c.script, n.num, err)
	}
	return nil
}
