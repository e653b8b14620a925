package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quorate/quorate/internal/freeport"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/client"
)

// serveChildEnv makes the test binary run `quorate serve` with the
// arguments it holds (separated by newlines), so a test can kill a real
// server process with SIGKILL.
const serveChildEnv = "QUORATE_TEST_SERVE_CHILD"

func TestMain(m *testing.M) {
	if args := os.Getenv(serveChildEnv); args != "" {
		main2(strings.Split(args, "\n"))
		return
	}
	os.Exit(m.Run())
}

// main2 is main with its arguments given.
func main2(args []string) {
	if err := run(context.Background(), args, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "quorate:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startChild starts `quorate serve args...` in a child process and waits
// until it is ready.
func startChild(t *testing.T, addr string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveChildEnv+"="+strings.Join(append([]string{"serve", "--http-addr", addr}, args...), "\n"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	c := client.NewNode(addr, nil)
	require.Eventually(t, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		return c.Ready(context.Background()) == nil
	}, 20*time.Second, 20*time.Millisecond)
	select {
	case <-exited:
		t.Fatalf("serve exited early:\n%s", stderr.String())
	default:
	}
	return cmd
}

// A node killed with SIGKILL under load and restarted holds every decision
// it acknowledged: for rate-0 buckets, the tokens consumed lie between the
// acknowledged admissions and those plus the calls whose outcome the kill
// left unknown. Run for both log layouts.
func TestKilledNodeKeepsAcknowledgedDecisions(t *testing.T) {
	for _, layout := range []string{"shared", "boltdb"} {
		t.Run(layout, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "limits.json")
			const capacity = 1_000_000
			require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`{"default":{"capacity":%d,"refill_per_second":0}}`, capacity)), 0o644))
			addr := freeport.Addr(t)
			args := []string{"--data-dir", filepath.Join(dir, "data"), "--config", cfg, "--log-store", layout,
				"--raft-addr", freeport.Addr(t), "--gossip-addr", freeport.Addr(t), "--log-level", "warn", "--groups", "4"}
			child := startChild(t, addr, args...)

			const clients, workers = 8, 16
			var acked, unknown [clients]atomic.Int64
			var total atomic.Int64
			killed := make(chan struct{})
			c := client.NewNode(addr, nil)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 100_000; i++ { // bounded; the kill ends it long before
						id := (w + i) % clients
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						r, err := c.Allow(ctx, fmt.Sprintf("crash-%d", id), 1, "")
						cancel()
						if err != nil {
							// Whatever failed after the kill may or may not
							// have been decided.
							unknown[id].Add(1)
							select {
							case <-killed:
								return
							default:
								continue
							}
						}
						if !assert.True(t, r.Allowed, "rate-0 buckets this large never run dry here") {
							return
						}
						acked[id].Add(1)
						if total.Add(1) == 3000 {
							assert.NoError(t, child.Process.Signal(syscall.SIGKILL))
							close(killed)
						}
					}
				}()
			}
			wg.Wait()
			require.GreaterOrEqual(t, total.Load(), int64(3000), "the load ran until the kill")

			startChild(t, addr, args...)
			ctx := context.Background()
			for id := range clients {
				got, err := c.GetClient(ctx, fmt.Sprintf("crash-%d", id))
				require.NoError(t, err)
				consumed := capacity - got.Remaining
				assert.GreaterOrEqual(t, consumed, acked[id].Load(), "client %d: an acknowledged decision was lost", id)
				assert.LessOrEqual(t, consumed, acked[id].Load()+unknown[id].Load(), "client %d: more consumed than decided", id)
			}
		})
	}
}
