package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
)

// TestRESP sends a command over a pipe and reads each kind of reply.
func TestRESP(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  any
		err   string
	}{
		{"+OK\r\n", "OK", ""},
		{":42\r\n", int64(42), ""},
		{"$3\r\nabc\r\n", "abc", ""},
		{"$-1\r\n", nil, ""},
		{"*2\r\n:1\r\n:9\r\n", []any{int64(1), int64(9)}, ""},
		{"*2\r\n:0\r\n-ERR inner\r\n", []any{int64(0), respError("ERR inner")}, ""},
		{"-NOSCRIPT No matching script\r\n", nil, "redis: NOSCRIPT No matching script"},
	} {
		client, server := net.Pipe()
		rc := &respConn{c: client, r: bufio.NewReader(client), w: bufio.NewWriter(client)}
		got := make(chan string, 1)
		go func() {
			buf := make([]byte, 64)
			n, _ := io.ReadAtLeast(server, buf, len("*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n"))
			got <- string(buf[:n])
			server.Write([]byte(tc.reply))
		}()
		v, err := rc.do(context.Background(), []byte("ECHO"), []byte("hi"))
		assert.Equal(t, "*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n", <-got, "request encoding")
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, "reply %q", tc.reply)
		} else {
			require.NoError(t, err, "reply %q", tc.reply)
			assert.Equal(t, tc.want, v, "reply %q", tc.reply)
		}
		rc.close()
		server.Close()
	}
}

func TestScrapeAndDelta(t *testing.T) {
	var syncs atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := syncs.Add(100)
		fmt.Fprintf(w, "# HELP quorate_raft_entry_decisions x\nquorate_raft_entry_decisions_sum{group=\"a b\"} %d\n", 10*n)
		fmt.Fprintf(w, "quorate_raft_entry_decisions_count %d\nquorate_log_syncs_total %d\nother_total 7\n", n, n)
	}))
	defer srv.Close()
	before, err := probe([]int{os.Getpid()}, []string{srv.URL}, "")
	require.NoError(t, err)
	after, err := probe([]int{os.Getpid()}, []string{srv.URL}, "")
	require.NoError(t, err)
	st := delta(before, after, 500)
	require.NotNil(t, st.DecisionsPerEntry)
	assert.InDelta(t, 10.0, *st.DecisionsPerEntry, 1e-9, "1000 decisions in 100 entries")
	require.NotNil(t, st.DecisionsPerSync)
	assert.InDelta(t, 5.0, *st.DecisionsPerSync, 1e-9, "500 answered over 100 syncs")
	assert.NotNil(t, st.CPUSeconds)

	none := delta(snapshot{metrics: map[string]float64{}}, snapshot{metrics: map[string]float64{}}, 500)
	assert.Nil(t, none.CPUSeconds, "no PIDs measured")
	assert.Nil(t, none.DecisionsPerSync, "no counter: reported as -")
}

// TestLoadIsBounded drives a fake quorate until -requests is reached, long
// before -duration, single and batched.
func TestLoadIsBounded(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/allow/batch" {
			var in struct{ Requests []json.RawMessage }
			assert.NoError(t, json.Unmarshal(body, &in))
			out := strings.Repeat(`{"allowed":false},`, len(in.Requests))
			fmt.Fprintf(w, `{"results":[%s]}`, strings.TrimSuffix(out, ","))
			return
		}
		fmt.Fprintf(w, `{"allowed":%t}`, n.Add(1)%2 == 0)
	}))
	defer srv.Close()
	keys := []string{"k-0", "k-1"}
	for _, batch := range []int{1, 10} {
		res, err := load(config{mode: "quorate", targets: []string{srv.URL}, conns: 4, batch: batch,
			policy: bucket.BuiltinDefault, keys: keys, maxReq: 200, seed: 1, duration: time.Minute})
		require.NoError(t, err)
		assert.Equal(t, int64(200), res.Allowed+res.Denied, "batch %d: every decision asked for", batch)
		assert.Equal(t, int64(200/batch), res.Calls, "batch %d", batch)
		assert.Zero(t, res.Errors, "batch %d: %s", batch, res.FirstErrText)
		assert.Less(t, res.Seconds, 30.0, "batch %d: stopped by count", batch)
	}
}

func TestReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.json")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range []result{
		{Label: "ceiling", Connections: 8, Keys: 1, Batch: 1, PerSecond: 1000},
		{Label: "quorate-1", Connections: 8, Keys: 1, Batch: 1, PerSecond: 250, serverStats: serverStats{DecisionsPerEntry: ptr(3.0)}},
		{Label: "quorate-1", Connections: 64, Keys: 10000, Batch: 1, PerSecond: 12345},
	} {
		require.NoError(t, enc.Encode(r))
	}
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	out := filepath.Join(t.TempDir(), "results.json")
	var table bytes.Buffer
	require.NoError(t, run([]string{"report", "-out", out, path}, &table))

	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	require.Len(t, lines, 5, table.String())
	assert.Contains(t, lines[2], "| quorate-1 | 64 | 10,000 uniform | 1 | 12,345 |", "many keys first")
	assert.Contains(t, lines[2], "| - |", "no ceiling for that workload")
	assert.Contains(t, lines[4], "| 250 | ×0.25 |", "ratio to the ceiling's 8-connection hot-key run")
	assert.Contains(t, lines[4], "| 3.0 | - | - | 0 |", "decisions per entry; no fsync counts")

	var rep report
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rep))
	require.Len(t, rep.Runs, 3)
	require.NotNil(t, rep.Runs[2].CeilingRatio)
	assert.InDelta(t, 0.25, *rep.Runs[2].CeilingRatio, 1e-9)
}

// Repeated runs of a row are one row, the median run, and the gRPC row
// alternated with its HTTP row, or the coalesced client row with the
// one-call client row, gets its ratio run by run; no run's failures are
// hidden by the median.
func TestReportTakesMediansAndRatiosOfAlternatedRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.json")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	run64 := func(label string, perSecond float64, errors int64) result {
		return result{Label: label, Connections: 64, Keys: 10000, Batch: 1, PerSecond: perSecond, Errors: errors}
	}
	p99 := func(r result, micros int64) result { r.P99Micros = micros; return r }
	for _, r := range []result{
		run64("ceiling", 20000, 0),
		run64("quorate-3", 4000, 0), run64("quorate-3, gRPC", 4400, 0),
		run64("quorate-3", 5000, 2), run64("quorate-3, gRPC", 4500, 0),
		run64("quorate-3", 4500, 0), run64("quorate-3, gRPC", 5400, 1),
		p99(run64("quorate-1, client, coalesced", 60000, 0), 4000), p99(run64("quorate-1, client", 20000, 0), 10000),
		p99(run64("quorate-1, client, coalesced", 45000, 0), 5000), p99(run64("quorate-1, client", 18000, 0), 10000),
	} {
		require.NoError(t, enc.Encode(r))
	}
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	out := filepath.Join(t.TempDir(), "results.json")
	var table bytes.Buffer
	require.NoError(t, run([]string{"report", "-out", out, path}, &table))

	text := table.String()
	assert.Contains(t, text, "| quorate-3 (median of 3) | 64 | 10,000 uniform | 1 | 4,500 | ×0.23 |")
	assert.Contains(t, text, "| quorate-3, gRPC (median of 3) | 64 | 10,000 uniform | 1 | 4,500 | ×0.23 |")
	assert.Regexp(t, `\| quorate-3 \(median of 3\) .*\| 2 \|\n`, text, "failed calls of every run")
	assert.Contains(t, text, "- quorate-3, 64 conns: ×1.10 ×0.90 ×1.20; median ×1.10\n", "no p99 ratio where p99 is unknown")
	assert.Contains(t, text, "- quorate-1, client, 64 conns: ×3.00 ×2.50; median ×2.75; p99 ×0.40 ×0.50; median ×0.45\n")

	var rep report
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rep))
	require.Len(t, rep.Runs, 5, "one row per label and workload")
	assert.Equal(t, []float64{4000, 5000, 4500}, rep.Runs[1].Repeats, "in the order run")
	assert.Nil(t, rep.Runs[0].Repeats, "a single run has none")
}

// With -each, every key is asked for exactly once.
func TestEachAsksForEveryKeyOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Requests []struct{ Client string } }
		assert.NoError(t, json.NewDecoder(r.Body).Decode(&in))
		mu.Lock()
		for _, q := range in.Requests {
			seen[q.Client]++
		}
		mu.Unlock()
		fmt.Fprintf(w, `{"results":[%s]}`, strings.TrimSuffix(strings.Repeat(`{"allowed":true},`, len(in.Requests)), ","))
	}))
	defer srv.Close()
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("k-%d", i)
	}
	res, err := load(config{mode: "quorate", targets: []string{srv.URL}, conns: 7, batch: 50, each: true,
		policy: bucket.BuiltinDefault, keys: keys, maxReq: int64(len(keys)), seed: 1, duration: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, int64(len(keys)), res.Allowed)
	assert.Len(t, seen, len(keys))
	for k, n := range seen {
		assert.Equal(t, 1, n, k)
	}
}
