package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/cluster/clustertest"
	"github.com/quorate/quorate/jepsen/checker"
	"github.com/quorate/quorate/jepsen/history"
	"github.com/quorate/quorate/server/httpapi"
)

// startNode runs a real single node behind the real HTTP API on loopback.
func startNode(t *testing.T) string {
	t.Helper()
	return startNodeWith(t, func(h http.Handler) http.Handler { return h })
}

// startNodeWith is startNode with the API handler wrapped by wrap (to
// plant a bug in front of a correct node).
func startNodeWith(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	n := clustertest.StartNode(t, cluster.Options{NodeID: "w1", Groups: 2})
	srv := httptest.NewServer(wrap(httpapi.New(n, httpapi.Options{})))
	t.Cleanup(srv.Close)
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

	// Pretend the answer to an applied attempt was lost, and add an attempt
	// that never reached the cluster: Resolve must ask about both with
	// their own request ids, learn the first (a duplicate of the original
	// decision) and make the second's decision, and change nothing
	// recorded before.
	applied := ops[5]
	ops[5].Outcome, ops[5].Allowed, ops[5].Remaining, ops[5].Stamp, ops[5].Status = history.OutcomeInfo, false, 0, 0, 0
	lost := ops[5]
	never := history.Op{Process: 9, Key: "cold-0", Kind: history.KindAllow, Cost: 1, RequestID: "never-sent",
		Invoke: time.Now().UnixNano(), Complete: time.Now().UnixNano(), Outcome: history.OutcomeInfo, Error: "timeout"}
	ops = append(ops, never)

	ops = Resolve(context.Background(), cfg, ops, time.Minute)
	require.Len(t, ops, 23, "one probe each")
	byID := map[string][]history.Op{}
	for _, op := range ops {
		byID[op.RequestID] = append(byID[op.RequestID], op)
	}
	got := byID[applied.RequestID]
	require.Len(t, got, 2)
	assert.Equal(t, lost, got[0], "the lost attempt is kept as it was")
	probe := got[1]
	assert.Equal(t, "resolve", probe.Probe)
	assert.Equal(t, 1, probe.Attempt)
	assert.Equal(t, history.OutcomeOK, probe.Outcome)
	assert.True(t, probe.Duplicate, "the original decision, not a new one")
	assert.Equal(t, applied.Stamp, probe.Stamp)
	assert.Equal(t, applied.Remaining, probe.Remaining)

	got = byID["never-sent"]
	require.Len(t, got, 2, "the unknown attempt and the probe that decided the request")
	assert.Equal(t, history.OutcomeInfo, got[0].Outcome)
	assert.Equal(t, history.OutcomeOK, got[1].Outcome)
	assert.False(t, got[1].Duplicate, "nothing had been applied: the probe decided")
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		status  int
		code    string
		decoded bool
		want    string
	}{
		{200, "", true, history.OutcomeOK},
		{200, "decode", false, history.OutcomeInfo},
		{400, "invalid_cost", true, history.OutcomeFail},
		{413, "body_too_large", true, history.OutcomeFail},
		{431, "decode", false, history.OutcomeFail},
		{503, "unavailable", true, history.OutcomeFail},
		{503, "shutting_down", true, history.OutcomeFail},
		{503, "timeout", true, history.OutcomeFail},
		{503, "overloaded", true, history.OutcomeFail},
		{503, "too_many_clients", true, history.OutcomeFail},
		{503, "outcome_unknown", true, history.OutcomeInfo},
		{503, "something_new", true, history.OutcomeInfo},
		{503, "decode", false, history.OutcomeInfo},
		{500, "internal", true, history.OutcomeInfo},
		{502, "decode", false, history.OutcomeInfo},
	} {
		assert.Equal(t, tc.want, Classify(tc.status, tc.code, tc.decoded), "%d %s", tc.status, tc.code)
	}
}

// TestTransportErrors: a request that never got a connection is fail; one
// whose connection broke after it was sent is info.
func TestTransportErrors(t *testing.T) {
	cfg := config("")
	cfg.OpTimeout, cfg.Now = 200*time.Millisecond, time.Now
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	op := attemptOnce(context.Background(), cfg, history.Op{Key: "a", Kind: history.KindAllow, Cost: 1, Node: closed})
	assert.Equal(t, history.OutcomeFail, op.Outcome, "connection refused: nothing was sent")
	assert.Equal(t, "dial", op.Error)

	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // the request arrived; the answer never comes
		}
	}))
	t.Cleanup(hang.Close)
	op = attemptOnce(context.Background(), cfg, history.Op{Key: "a", Kind: history.KindAllow, Cost: 1, Node: hang.URL})
	assert.Equal(t, history.OutcomeInfo, op.Outcome, "the request was sent: it may have been applied")
	assert.Equal(t, "send", op.Error)
	assert.LessOrEqual(t, op.Invoke, op.Complete)
}

// TestEveryAttemptIsRecorded: a node behind a planted bug that applies the
// first attempt of some requests and answers 503 unavailable ("nothing was
// decided"). The workload records the lie and the retry's duplicate answer
// as two attempts, so the duplicates checker sees an applied request the
// server called unapplied. Folded into one operation (the old workload),
// the lie vanished into an ok decision. The planted bug reads single
// requests only, so the client sends every decision alone.
func TestEveryAttemptIsRecorded(t *testing.T) {
	cfg := config(startNodeWith(t, lying()))
	cfg.MaxOps, cfg.NoCoalesce = 60, true
	ops := Run(context.Background(), cfg)
	lies := 0
	for i, op := range ops {
		if op.Outcome == history.OutcomeFail {
			lies++
			assert.Equal(t, 503, op.Status, "op %d", i)
			assert.Equal(t, "unavailable", op.Error)
		}
	}
	require.Positive(t, lies, "the planted bug lied")
	res := checker.Duplicates(history.History{Ops: ops}, checker.Params{})
	assert.False(t, res.Valid, "every lie is an applied request the server said was not")
	assert.Equal(t, lies, res.Summary["orphaned"])

	// Told that the server answers unavailable ambiguously, the workload
	// records those answers as unknown, and the duplicates resolve them.
	cfg = config(startNodeWith(t, lying()))
	cfg.MaxOps, cfg.Ambiguous503, cfg.NoCoalesce = 60, []string{"unavailable"}, true
	ops = Run(context.Background(), cfg)
	res = checker.Duplicates(history.History{Ops: ops}, checker.Params{})
	assert.True(t, res.Valid, res.Failures)
	assert.Positive(t, res.Summary["resolved_info"])
}

// lying returns a planted bug for startNodeWith: the first attempt of every
// request whose id ends in 3 is applied and answered 503 unavailable.
func lying() func(http.Handler) http.Handler {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				RequestID string `json:"request_id"`
			}
			_ = json.Unmarshal(body, &req)
			mu.Lock()
			lie := strings.HasSuffix(req.RequestID, "3") && !seen[req.RequestID]
			seen[req.RequestID] = true
			mu.Unlock()
			if !lie {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(httptest.NewRecorder(), r) // applied...
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable) // ...and called unapplied
			_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"no leader"}}`)
		})
	}
}

func TestRepeatsAndAccountKeys(t *testing.T) {
	cfg := config(startNode(t))
	cfg.MaxOps, cfg.RepeatFraction, cfg.AccountKeys, cfg.AccountFraction = 100, 1, 2, 0.3
	ops := Run(context.Background(), cfg)
	repeats, accounts := 0, 0
	orig := map[string]history.Op{}
	for _, op := range ops {
		require.Equal(t, history.OutcomeOK, op.Outcome)
		if strings.HasPrefix(op.Key, "acct-") {
			accounts++
			assert.Empty(t, op.RequestID, "accounting requests carry no request id")
			assert.False(t, op.Duplicate)
			continue
		}
		if op.Probe != "repeat" {
			orig[op.RequestID] = op
			continue
		}
		repeats++
		o := orig[op.RequestID]
		assert.True(t, op.Duplicate, "a repeat is answered from memory")
		assert.Equal(t, []any{o.Allowed, o.Remaining, o.Stamp}, []any{op.Allowed, op.Remaining, op.Stamp})
	}
	assert.Positive(t, accounts)
	assert.Equal(t, 100-accounts, repeats, "every ok operation with a request id was repeated once")
}

// put sends a JSON PUT to url and returns the status, retrying (at most
// 100 times, 100 ms apart) while the node answers 409 cluster_version: a
// fresh node reaches cluster version 2 by itself, a few seconds in.
func put(t *testing.T, url string, body any) int {
	t.Helper()
	data, _ := json.Marshal(body)
	for range 100 {
		req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict {
			return resp.StatusCode
		}
		time.Sleep(100 * time.Millisecond)
	}
	return http.StatusConflict
}

// TestWindowAndFillKeys: window keys on a real node's sliding-window tier
// are answered with its window and pass the window checker, admitted and
// denied; fill keys get their share.
func TestWindowAndFillKeys(t *testing.T) {
	assert.Equal(t, "win-1", WindowKey(1))
	assert.Equal(t, "fill-0", FillKey(0))
	url := startNode(t)
	require.Equal(t, http.StatusOK, put(t, url+"/v1/tiers/win", map[string]any{"algorithm": "sliding_window", "limit": 5, "window_seconds": 1}))
	require.Equal(t, http.StatusOK, put(t, url+"/v1/clients/win-0/tier", map[string]string{"tier": "win"}))
	cfg := config(url)
	cfg.MaxOps, cfg.WindowKeys, cfg.WindowFraction, cfg.FillKeys, cfg.FillFraction = 400, 1, 0.3, 2, 0.1
	ops := Run(context.Background(), cfg)
	seen := map[string]int{}
	for _, op := range ops {
		switch {
		case op.Key == WindowKey(0):
			seen["window"]++
			assert.Equal(t, int64(1), op.WindowSeconds, "a window decided: %+v", op)
			assert.Equal(t, int64(5), op.Limit)
		case strings.HasPrefix(op.Key, "fill-"):
			seen["fill"]++
			assert.Zero(t, op.WindowSeconds, "a token bucket decided")
		}
	}
	assert.Positive(t, seen["window"])
	assert.Positive(t, seen["fill"])
	p := checker.Params{Default: bucket.BuiltinDefault, Tiers: map[string]bucket.Policy{"win": {Algorithm: bucket.SlidingWindow, Capacity: 5, Window: bucket.Second}},
		KeyTiers: map[string]string{WindowKey(0): "win"}}
	res := checker.Windows(history.History{Ops: ops}, p)
	require.True(t, res.Valid, "%v", res.Failures)
	assert.Equal(t, 1, res.Summary["keys"])
	assert.Positive(t, res.Summary["admissions"])
	assert.Positive(t, res.Summary["denials"])
}
