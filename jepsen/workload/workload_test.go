package workload

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/jepsen/history"
	"github.com/quorate/quorate/transport/httpapi"
)

// startNode runs a real single node behind the real HTTP API on loopback.
func startNode(t *testing.T) string {
	t.Helper()
	n, err := cluster.New(cluster.Options{
		NodeID: "w1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Groups: 2,
		Logger: slog.New(slog.DiscardHandler), ReclaimInterval: -1,
		Raft: cluster.RaftTimings{HeartbeatTimeout: 50 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond,
			LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond, SnapshotInterval: time.Hour, SnapshotThreshold: 1 << 20},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	srv := httptest.NewServer(httpapi.New(n, httpapi.Options{}))
	t.Cleanup(srv.Close)
	require.Eventually(t, func() bool { return n.Ready(context.Background()) == nil }, 10*time.Second, 10*time.Millisecond)
	return srv.URL
}

func config(url string) Config {
	return Config{
		Targets: []string{url}, HTTP: http.DefaultClient, Seed: 3, Workers: 4, HotKeys: 1, ColdKeys: 5,
		HotFraction: 0.5, OpTimeout: time.Second, RetryFor: 5 * time.Second, Duration: 10 * time.Second, MaxOps: 300,
	}
}

func TestRunRecordsEveryOperation(t *testing.T) {
	url := startNode(t)
	ops := Run(context.Background(), config(url))
	require.Len(t, ops, 300, "MaxOps bounds the run")
	ids := map[string]bool{}
	for i, op := range ops {
		assert.Equal(t, history.OutcomeOK, op.Outcome, "op %d", i)
		assert.False(t, ids[op.RequestID], "request id %s reused across operations", op.RequestID)
		ids[op.RequestID] = true
		assert.LessOrEqual(t, op.Invoke, op.Complete)
		assert.NotZero(t, op.Stamp, "op %d has the server's stamp", i)
		assert.Equal(t, int64(10), op.Limit, "the default policy decided")
		if i > 0 {
			assert.LessOrEqual(t, ops[i-1].Invoke, op.Invoke, "ops are in invoke order")
		}
	}
}

func TestMoverKeys(t *testing.T) {
	assert.Equal(t, "mover-2", MoverKey(2))
	url := startNode(t)
	cfg := config(url)
	cfg.MaxOps, cfg.MoverKeys, cfg.MoverFraction = 200, 3, 0.2
	seen := map[string]int{}
	for _, op := range Run(context.Background(), cfg) {
		switch {
		case strings.HasPrefix(op.Key, "mover-"):
			seen["mover"]++
			assert.Contains(t, []string{MoverKey(0), MoverKey(1), MoverKey(2)}, op.Key)
		case strings.HasPrefix(op.Key, "hot-"):
			seen["hot"]++
		default:
			seen["cold"]++
		}
	}
	assert.Positive(t, seen["mover"])
	assert.Less(t, seen["mover"], seen["hot"], "movers get a small share")
	assert.Positive(t, seen["cold"])
}

func TestResolveLearnsUnknownOutcomes(t *testing.T) {
	url := startNode(t)
	cfg := config(url)
	cfg.MaxOps = 20
	ops := Run(context.Background(), cfg)
	require.Len(t, ops, 20)

	// Pretend the answer to an applied op was lost, and add an op that was
	// never sent: Resolve must learn the first and declare the second
	// never applied, recording the decision its probe caused.
	applied := ops[5]
	ops[5].Outcome, ops[5].Allowed, ops[5].Remaining, ops[5].Stamp = history.OutcomeInfo, false, 0, 0
	never := history.Op{Process: 9, Key: "cold-0", Kind: history.KindAllow, Cost: 1, RequestID: "never-sent",
		Invoke: time.Now().UnixNano(), Complete: time.Now().UnixNano(), Outcome: history.OutcomeInfo}
	ops = append(ops, never)

	ops = Resolve(context.Background(), cfg, ops, time.Minute)
	byID := map[string][]history.Op{}
	for _, op := range ops {
		byID[op.RequestID] = append(byID[op.RequestID], op)
	}
	got := byID[applied.RequestID]
	require.Len(t, got, 1)
	assert.Equal(t, history.OutcomeOK, got[0].Outcome)
	assert.Equal(t, applied.Stamp, got[0].Stamp, "the original decision, not a new one")
	assert.Equal(t, applied.Remaining, got[0].Remaining)
	assert.Greater(t, got[0].Complete, applied.Complete, "the interval runs until the answer that resolved it")

	got = byID["never-sent"]
	require.Len(t, got, 2, "the unknown op and the decision its probe caused")
	outcomes := []string{got[0].Outcome, got[1].Outcome}
	assert.ElementsMatch(t, []string{history.OutcomeFail, history.OutcomeOK}, outcomes)
}
