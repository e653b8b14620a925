package workload

// The workload's failover is the Go client's (package client, whose own
// tests cover its node quarantine); these tests check that the fault
// suite's workload, driving it, records every attempt it makes.

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/jepsen/history"
)

// TestRunFailsOverFromADeadNode: one of two targets refuses connections.
// Every operation is still decided, every attempt (the refused ones too)
// is recorded, a retry goes to the other node at once, and the dead node
// gets only its probes.
func TestRunFailsOverFromADeadNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	live := startNode(t)
	cfg := config(live)
	cfg.Targets = []string{dead, live}
	cfg.MaxOps = 300
	ops := Run(context.Background(), cfg)
	decided := map[string]bool{}
	toDead := 0
	for _, op := range ops {
		if op.Node == dead {
			toDead++
			assert.Equal(t, history.OutcomeFail, op.Outcome)
			assert.Equal(t, "dial", op.Error)
			continue
		}
		assert.Equal(t, history.OutcomeOK, op.Outcome)
		decided[op.RequestID] = true
	}
	assert.Len(t, decided, 300, "every operation decided")
	assert.Equal(t, 300+toDead, len(ops), "every attempt recorded")
	assert.Positive(t, toDead)
	assert.Less(t, toDead, 30, "the dead node gets probes, not a share of the load")
	for _, op := range ops {
		if op.Node == dead {
			// Its retry went to the live node at once: no backoff.
			for _, next := range ops {
				if next.RequestID == op.RequestID && next.Attempt == op.Attempt+1 {
					assert.Less(t, next.Invoke-op.Complete, int64(10*time.Millisecond))
				}
			}
		}
	}
}

// TestRunSkipsANodeThatHoldsRequests: a node that waits out the caller's
// deadline and answers 503 unavailable (an isolated node) costs a few
// slow attempts, not a third of them.
func TestRunSkipsANodeThatHoldsRequests(t *testing.T) {
	isolated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"no leader"}}`))
	}))
	t.Cleanup(isolated.Close)
	live := startNode(t)
	cfg := config(live)
	cfg.Targets, cfg.MaxOps = []string{live, isolated.URL}, 400
	ops := Run(context.Background(), cfg)
	held := 0
	for _, op := range ops {
		if op.Node == isolated.URL {
			held++
			assert.Equal(t, "unavailable", op.Error)
		}
	}
	assert.Positive(t, held)
	assert.Less(t, float64(held)/float64(len(ops)), 0.1, "%d of %d attempts held", held, len(ops))
}
