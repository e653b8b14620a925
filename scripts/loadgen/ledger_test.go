package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/internal/rtmetrics"
)

// sample is a profile sample of cpu nanoseconds whose stack, leaf first,
// is fns.
func sample(cpu int64, fns ...string) *profile.Sample {
	s := &profile.Sample{Value: []int64{1, cpu}}
	for i, fn := range fns {
		s.Location = append(s.Location, &profile.Location{ID: uint64(i + 1), Line: []profile.Line{{Function: &profile.Function{Name: fn}}}})
	}
	return s
}

func TestSamplesAreChargedToTheFirstStageOnTheirStack(t *testing.T) {
	const (
		http    = "net/http.(*conn).serve"
		allow   = modPath + "cluster.(*Node).Allow"
		fwd     = modPath + "cluster/forward.(*Forwarder).Call"
		raftnet = raftnetFn + "(*Net).send"
		tls     = "crypto/tls.(*Conn).Write"
		apply   = modPath + "fsm.(*FSM).Apply"
		runFSM  = raftPath + "(*Raft).runFSM"
	)
	for _, tc := range []struct {
		want  string
		stack []string
	}{
		{"fsync (log sync)", []string{"syscall.Fdatasync", modPath + "raftlog.(*Store).StoreLogs", raftPath + "(*Raft).leaderLoop"}},
		{"fsync (log sync)", []string{"syscall.Syscall", "golang.org/x/sys/unix.Fdatasync", "github.com/cockroachdb/pebble/v2/vfs.(*linuxFile).SyncData"}}, // pebble's WAL
		{"log store (encode, write)", []string{"github.com/cockroachdb/pebble/v2.(*DB).Apply", modPath + "raftlog.(*Store).StoreLogs", raftPath + "(*Raft).leaderLoop"}},
		{"raft leader (replication, commit)", []string{raftPath + "(*Raft).leaderLoop"}},
		{"raft follower", []string{raftPath + "(*Raft).appendEntries", raftPath + "(*Raft).runFollower"}},
		{"request-id and origin memory", []string{modPath + "fsm.(*idMemory).get", apply, runFSM}},
		{"FSM apply (every replica)", []string{modPath + "bucket.Decide", apply, runFSM}},
		{"raft port TLS (crypto, records)", []string{"crypto/aes.encryptBlock", tls, raftnet}},
		{"raft port syscalls (read, write)", []string{"syscall.write", "internal/poll.(*FD).Write", "net.(*conn).Write", tls, raftnet}},
		{"raft port syscalls (read, write)", []string{"internal/poll.(*FD).Write", raftnet}},
		{"raft transport (frames)", []string{"encoding/binary.AppendUvarint", raftnet}},
		{"forwarding to leaders (peer RPC)", []string{"encoding/binary.Write", fwd, allow, http}},
		{"admission and group commit", []string{"runtime.mallocgc", allow, http}},
		{"HTTP in and out (API)", []string{"encoding/json.Unmarshal", http}},
		{"HTTP in and out (API)", []string{tls, http}}, // TLS on the API port is the API's
		{"scheduler (wake-ups, hand-offs, idle)", []string{"runtime.futex", "runtime.wakep", "runtime.ready", "runtime.goready", allow, http}},
		{"GC (background and assists)", []string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcAssistAlloc", "runtime.mallocgc", http}},
		{"gossip (memberlist)", []string{"github.com/hashicorp/memberlist.(*Memberlist).probe"}},
		{"other", []string{"runtime.sysmon"}},
	} {
		assert.Equal(t, tc.want, stageOf(sample(1, tc.stack...)), "stack %v", tc.stack)
	}

	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			sample(30e6, "encoding/json.Unmarshal", http),
			sample(10e6, "encoding/json.Marshal", http),
			sample(20e6, "syscall.Fdatasync"),
		},
	}
	got := classify(p)
	assert.InDelta(t, 0.040, got["HTTP in and out (API)"], 1e-9)
	assert.InDelta(t, 0.020, got["fsync (log sync)"], 1e-9)
	assert.Len(t, got, 2)
}

var spin atomic.Int64

// burn keeps a core busy in a function of its own until stop is closed,
// allocating as it goes, and counts its "decisions".
func burn(stop <-chan struct{}, decisions *atomic.Int64) {
	var keep [][]byte
	for {
		select {
		case <-stop:
			return
		default:
		}
		for i := range 20_000 {
			spin.Add(int64(i))
		}
		keep = append(keep[:0], make([]byte, 256))
		decisions.Add(1)
	}
}

// TestTheLedgerMeasuresARealProcess profiles this test process through a
// real debug listener (pprof and the runtime's counters) while it burns a
// core, and checks that the ledger accounts for the window.
func TestTheLedgerMeasuresARealProcess(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.Handle(rtmetrics.Path, rtmetrics.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	var decisions atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); burn(stop, &decisions) }()
	t.Cleanup(func() { close(stop); <-done })

	lp := ledgerProbe{urls: []string{srv.URL}, pids: []int{os.Getpid()}, hc: srv.Client()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := lp.run(ctx, 10*time.Millisecond, time.Second, decisions.Load)
	require.NoError(t, err)

	assert.Equal(t, 1, l.Nodes)
	assert.InDelta(t, 1.0, l.Seconds, 0.5, "the profile covers one second")
	require.Positive(t, l.Decisions)
	assert.Positive(t, l.ProcCPUSeconds, "/proc charged the process CPU")
	assert.Positive(t, l.ProfileCPUSeconds, "the profile sampled it")
	var share, micros float64
	for _, s := range l.Stages {
		share += s.Share
		micros += s.Micros
	}
	assert.InDelta(t, 1.0, share, 1e-9, "every sample is charged to one stage")
	assert.InDelta(t, l.CPUMicros, micros, 1e-6, "the stages add up to the measured CPU")
	assert.GreaterOrEqual(t, l.PerDecision.Allocs, 0.9, "each burn loop allocates once")
	assert.Positive(t, l.PerDecision.Wakeups)

	var out bytes.Buffer
	writeLedger(&out, "self", l)
	assert.Contains(t, out.String(), "| stage | self |")
	assert.Contains(t, out.String(), "| other | ")
}

func TestTheLedgerNeedsADebugURLPerPID(t *testing.T) {
	_, err := ledgerProbe{urls: []string{"http://127.0.0.1:1"}, pids: []int{1, 2}}.run(context.Background(), 0, time.Second, func() int64 { return 0 })
	assert.ErrorContains(t, err, "one debug URL per PID")
	var out bytes.Buffer
	err = run([]string{"-ledger", "http://127.0.0.1:9", "-pids", "1", "-duration", "1s"}, &out)
	assert.ErrorContains(t, err, "at least 2s")
}
