package fsm_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// memSink is an in-memory raft.SnapshotSink. A non-nil writeErr makes every
// Write fail.
type memSink struct {
	buf       bytes.Buffer
	writeErr  error
	closed    bool
	cancelled bool
}

var _ raft.SnapshotSink = (*memSink)(nil)

func (s *memSink) Write(p []byte) (int, error) {
	if s.writeErr != nil {
		return 0, s.writeErr
	}
	return s.buf.Write(p)
}
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

// readCloser records whether Restore closed it.
type readCloser struct {
	io.Reader
	closed bool
}

func (r *readCloser) Close() error { r.closed = true; return nil }

// randomLogs returns n raft log entries, indexes 1..n: commands of every
// type over a few clients, with request ids and retries, stamps that
// sometimes go backwards, and a few raft entries that are not commands.
func randomLogs(rng *rand.Rand, n int) []*raft.Log {
	tiers := []string{"free", "pro", "gone"}
	pol := func() bucket.Policy {
		return bucket.Policy{Capacity: 1 + rng.Int64N(20), Rate: []int64{0, bucket.Scale / 3, bucket.Scale, 7 * bucket.Scale}[rng.IntN(4)]}
	}
	client := func() string { return fmt.Sprintf("c%d", rng.IntN(25)) }
	now := t0
	stamp := func() int64 {
		switch rng.IntN(10) {
		case 0:
			return now - rng.Int64N(int64(time.Minute)) // backwards
		case 1:
			now += int64(time.Minute) + rng.Int64N(int64(time.Hour))
		default:
			now += rng.Int64N(int64(time.Second))
		}
		return now
	}
	var version uint64 = 50
	logs := make([]*raft.Log, n)
	for i := range logs {
		l := &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand}
		var c fsm.Command
		switch x := rng.IntN(100); {
		case x < 3:
			l.Type = []raft.LogType{raft.LogNoop, raft.LogBarrier, raft.LogConfiguration}[rng.IntN(3)]
		case x < 75:
			a := fsm.Allow{Stamp: stamp(), Requests: make([]fsm.AllowRequest, 1+rng.IntN(20))}
			for j := range a.Requests {
				r := fsm.AllowRequest{Client: client(), Cost: rng.Int64N(4)}
				if rng.IntN(4) == 0 {
					r.RequestID = fmt.Sprintf("id%d", rng.IntN(40))
				}
				if rng.IntN(3) > 0 { // from a node that gives origins
					r.Origin = fsm.MakeOrigin(uint32(rng.IntN(3)), 1+uint64(rng.IntN(60)))
					r.Retry = rng.IntN(5) == 0
				}
				a.Requests[j] = r
			}
			c = a
		case x < 82:
			c = fsm.SetTier{Client: client(), Tier: []string{"", "free", "pro", "gone", "nope"}[rng.IntN(5)]}
		case x < 90:
			switch rng.IntN(4) {
			case 0:
				c = fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: tiers[rng.IntN(3)]}
			case 1:
				c = fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: pol()}
			case 2:
				c = setTierOp(tiers[rng.IntN(3)], bucket.Policy{Capacity: 0}) // refused
			default:
				c = setTierOp(tiers[rng.IntN(3)], pol())
			}
		case x < 93:
			version += rng.Uint64N(3)
			c = fsm.InstallConfig{Config: bucket.Config{Version: version, Default: pol(), Tiers: map[string]bucket.Policy{"pro": pol()}}}
		default:
			c = fsm.Reclaim{Stamp: stamp()}
		}
		if c != nil {
			l.Data = fsm.Encode(c)
		}
		logs[i] = l
	}
	return logs
}

// applyInBatches applies logs with ApplyBatch in batches of random sizes
// 1..maxBatch and returns the results in log order.
func applyInBatches(t *testing.T, f *fsm.FSM, logs []*raft.Log, rng *rand.Rand, maxBatch int) []any {
	t.Helper()
	var out []any
	for len(logs) > 0 {
		n := min(1+rng.IntN(maxBatch), len(logs))
		res := f.ApplyBatch(logs[:n])
		require.Len(t, res, n, "ApplyBatch must return one result per log")
		out = append(out, res...)
		logs = logs[n:]
	}
	return out
}

var snapshotOpts = fsm.Options{Default: bucket.Policy{Capacity: 5, Rate: bucket.Scale}, DedupMax: 64, OriginDedupMax: 16}

func TestSnapshotIndependentOfBatching(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			logs := randomLogs(rng, 3000)
			one, many := newFSM(t, snapshotOpts), newFSM(t, snapshotOpts)
			resOne := applyInBatches(t, one, logs, rng, 1)
			resMany := applyInBatches(t, many, logs, rng, 200)
			require.Len(t, resMany, len(resOne))
			for i := range resOne {
				if !assert.Equal(t, resOne[i], resMany[i], "result of entry %d", i+1) {
					break
				}
			}
			assert.Equal(t, one.MarshalSnapshot(), many.MarshalSnapshot())
			assert.Equal(t, uint64(len(logs)), many.AppliedIndex())

			// The same entries through ApplyCommand differ only in the applied index.
			direct := newFSM(t, snapshotOpts)
			for _, l := range logs {
				if l.Type == raft.LogCommand {
					direct.ApplyCommand(l.Data)
				}
			}
			assert.NotEqual(t, one.MarshalSnapshot(), direct.MarshalSnapshot(), "the applied index is in the snapshot")
			direct.ApplyBatch([]*raft.Log{{Index: uint64(len(logs)), Type: raft.LogNoop}})
			assert.Equal(t, one.MarshalSnapshot(), direct.MarshalSnapshot())
		})
	}
}

func TestSnapshotRestoreContinues(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	logs := randomLogs(rng, 3000)
	never := newFSM(t, snapshotOpts)
	want := applyInBatches(t, never, logs, rng, 50)
	final := never.MarshalSnapshot()

	for _, cut := range []int{0, 1, 999, 1500, 2999, 3000} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			src := newFSM(t, snapshotOpts)
			applyInBatches(t, src, logs[:cut], rng, 50)
			atCut := src.MarshalSnapshot()
			snap, err := src.Snapshot()
			require.NoError(t, err)
			// Applying more before Persist must not leak into the snapshot.
			applyInBatches(t, src, logs[cut:min(cut+100, len(logs))], rng, 50)
			sink := &memSink{}
			require.NoError(t, snap.Persist(sink))
			snap.Release()
			assert.True(t, sink.closed, "Persist must close the sink")
			assert.False(t, sink.cancelled)
			assert.Equal(t, atCut, sink.buf.Bytes(), "Persist writes exactly MarshalSnapshot's bytes")

			// Restore into a new FSM and into one that holds other state.
			fresh := newFSM(t, snapshotOpts)
			dirty := newFSM(t, snapshotOpts)
			applyInBatches(t, dirty, randomLogs(rand.New(rand.NewPCG(99, 99)), 200), rng, 50)
			for name, f := range map[string]*fsm.FSM{"fresh": fresh, "dirty": dirty} {
				rc := &readCloser{Reader: bytes.NewReader(sink.buf.Bytes())}
				require.NoError(t, f.Restore(rc), name)
				assert.True(t, rc.closed, "%s: Restore must close the reader", name)
				assert.Equal(t, atCut, f.MarshalSnapshot(), "%s: restored state", name)
				assert.Equal(t, uint64(cut), f.AppliedIndex(), name)

				got := applyInBatches(t, f, logs[cut:], rng, 50)
				for i := range got {
					if !assert.Equal(t, want[cut+i], got[i], "%s: result of entry %d after restoring at %d", name, cut+i+1, cut) {
						break
					}
				}
				assert.Equal(t, final, f.MarshalSnapshot(), "%s: final state", name)
			}
		})
	}
}

func TestPersistCancelsOnWriteError(t *testing.T) {
	f := newFSM(t, snapshotOpts)
	applyInBatches(t, f, randomLogs(rand.New(rand.NewPCG(3, 3)), 100), rand.New(rand.NewPCG(3, 3)), 10)
	snap, err := f.Snapshot()
	require.NoError(t, err)
	errDisk := errors.New("disk full")
	sink := &memSink{writeErr: errDisk}
	assert.ErrorIs(t, snap.Persist(sink), errDisk)
	assert.True(t, sink.cancelled, "a failed Persist must cancel the sink")
	assert.False(t, sink.closed, "a failed Persist must not close the sink")
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	f := newFSM(t, snapshotOpts)
	applyInBatches(t, f, randomLogs(rng, 300), rng, 20)
	good := f.MarshalSnapshot()
	require.Greater(t, len(good), 100, "the state must be big enough to cut in many places")

	bad := map[string][]byte{
		"nil":           nil,
		"garbage":       []byte("definitely not a snapshot"),
		"magic only":    []byte("QRSNAP"),
		"wrong magic":   append([]byte("QRSNAX"), good[6:]...),
		"version 0":     append(append([]byte("QRSNAP"), 0), good[7:]...),
		"version 3":     append(append([]byte("QRSNAP"), 3), good[7:]...),
		"trailing byte": append(bytes.Clone(good), 0),
		"huge count":    append(bytes.Clone(good[:len(good)-1]), 0xff, 0xff, 0xff, 0xff, 0x0f),
	}
	for i := range len(good) {
		bad[fmt.Sprintf("cut at %d", i)] = good[:i]
	}
	// The current state differs from good, so a partial restore would show.
	applyInBatches(t, f, randomLogs(rng, 50), rng, 20)
	before := f.MarshalSnapshot()
	require.NotEqual(t, good, before)
	for name, data := range bad {
		rc := &readCloser{Reader: bytes.NewReader(data)}
		err := f.Restore(rc)
		assert.ErrorIs(t, err, fsm.ErrBadSnapshot, name)
		assert.True(t, rc.closed, "%s: Restore must close the reader", name)
		if !assert.Equal(t, before, f.MarshalSnapshot(), "%s: state changed", name) {
			break
		}
	}

	rc := &readCloser{Reader: io.MultiReader(bytes.NewReader(good[:10]), failingReader{})}
	assert.ErrorIs(t, f.Restore(rc), io.ErrUnexpectedEOF)
	assert.Equal(t, before, f.MarshalSnapshot(), "a failed read must leave the state")

	// The good snapshot still restores after all that.
	require.NoError(t, f.Restore(io.NopCloser(bytes.NewReader(good))))
	assert.Equal(t, good, f.MarshalSnapshot())
}

// While no policy or assignment changes, interleaving Reclaim entries
// changes no decision: a forgotten full bucket is a new full bucket, and
// request ids expire by group time whatever else is applied.
func TestReclaimChangesNoDecision(t *testing.T) {
	setup := []fsm.Command{
		setTierOp("free", policy(5, bucket.Scale)),
		setTierOp("slow", policy(3, bucket.Scale/10)),
		setTierOp("frozen", policy(4, 0)),
		setTierOp("tiny", policy(1, bucket.MaxRate)),
	}
	for i, tier := range []string{"free", "slow", "frozen", "tiny", "missing", ""} {
		for j := range 6 {
			setup = append(setup, fsm.SetTier{Client: fmt.Sprintf("c%d-%d", i, j), Tier: tier})
		}
	}
	plain, reclaimed := newFSM(t, snapshotOpts), newFSM(t, snapshotOpts)
	for _, c := range setup {
		plain.ApplyCommand(fsm.Encode(c))
		reclaimed.ApplyCommand(fsm.Encode(c))
	}

	rng := rand.New(rand.NewPCG(11, 11))
	now := t0
	decisions, forgotten, expired := 0, 0, 0
	for range 2000 {
		switch rng.IntN(20) {
		case 0:
			now += int64(time.Minute) + rng.Int64N(int64(5*time.Minute))
		case 1: // stays
		default:
			now += rng.Int64N(int64(2 * time.Second))
		}
		stamp := now
		if rng.IntN(10) == 0 {
			stamp -= rng.Int64N(int64(time.Minute))
		}
		a := fsm.Allow{Stamp: stamp, Requests: make([]fsm.AllowRequest, 1+rng.IntN(30))}
		for i := range a.Requests {
			a.Requests[i] = fsm.AllowRequest{Client: fmt.Sprintf("c%d-%d", rng.IntN(6), rng.IntN(6)), Cost: rng.Int64N(3)}
			if rng.IntN(3) == 0 {
				a.Requests[i].RequestID = fmt.Sprint(rng.IntN(50))
			}
		}
		if rng.IntN(3) == 0 {
			// Stamped like a leader would, between the group time and the
			// next entry's: it moves no decision's clock.
			next := max(plain.HighWater(), stamp)
			r := apply[*fsm.ReclaimResult](t, reclaimed, fsm.Reclaim{Stamp: next - rng.Int64N(int64(time.Second))*rng.Int64N(2)})
			forgotten += r.Buckets
			expired += r.Dedup
		}
		got := apply[*fsm.AllowResult](t, reclaimed, a)
		want := apply[*fsm.AllowResult](t, plain, a)
		require.Len(t, got.Decisions, len(a.Requests))
		for i := range want.Decisions {
			require.Equal(t, want.Decisions[i], got.Decisions[i], "decision %d: %+v", decisions, a.Requests[i])
			decisions++
		}
	}
	t.Logf("%d decisions compared, %d buckets reclaimed, %d request ids expired", decisions, forgotten, expired)
	assert.Greater(t, forgotten, 100, "reclaim must have had something to do")
	assert.Greater(t, expired, 0, "reclaim must have expired request ids")
}

func TestReclaimDeletesFullBuckets(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(2, bucket.Scale)})
	apply[*fsm.ConfigResult](t, f, setTierOp("frozen", policy(2, 0)))
	for _, c := range []string{"used", "peeked"} {
		apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "frozen-" + c, Tier: "frozen"})
	}
	apply[*fsm.AllowResult](t, f, fsm.Allow{Stamp: at(0), Requests: []fsm.AllowRequest{
		{Client: "a", Cost: 1},
		{Client: "peeker", Cost: 0},
		{Client: "frozen-used", Cost: 1},
		{Client: "frozen-peeked", Cost: 0},
	}})
	const year = 365 * 24 * time.Hour
	tests := []struct {
		at          time.Duration
		wantDeleted int
		wantLeft    int
	}{
		{0, 2, 2},                      // the peekers are full: a and frozen-used stay
		{500 * time.Millisecond, 0, 2}, // a holds 1.5 of 2
		{time.Second, 1, 1},            // a is full
		{100 * year, 0, 1},             // a used rate-0 bucket never refills
	}
	for i, tt := range tests {
		res := apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(tt.at)})
		buckets, _, _ := f.Stats()
		assert.Equal(t, tt.wantDeleted, res.Buckets, "step %d: reclaim(%v).Buckets = %d, want %d", i, tt.at, res.Buckets, tt.wantDeleted)
		assert.Equal(t, tt.wantLeft, buckets, "step %d: after reclaim(%v) %d buckets, want %d", i, tt.at, buckets, tt.wantLeft)
	}
	v := f.View("frozen-used", 0)
	assert.True(t, v.Known)
	assert.Equal(t, int64(1), v.Decision.RemainingTokens())
	d := allowOne(t, f, at(100*year), fsm.AllowRequest{Client: "frozen-used", Cost: 1})
	assert.True(t, d.Allowed)
	assert.Equal(t, int64(0), d.RemainingTokens(), "the rate-0 bucket kept its balance, it did not start full")
	d = allowOne(t, f, at(100*year), fsm.AllowRequest{Client: "a", Cost: 2})
	assert.True(t, d.Allowed, "a reclaimed client starts full")
}

// A snapshot is a view of the state when it was taken, whatever is applied
// while it is encoded: the FSM does not copy its maps for a snapshot, it
// copies a part when it first writes it (and the race detector watches the
// encoding run beside the applies).
func TestSnapshotIsAPointInTimeWhileAppliesGoOn(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	logs := randomLogs(rng, 4000)
	f := newFSM(t, snapshotOpts)
	applyInBatches(t, f, logs[:2000], rng, 20)
	want := f.MarshalSnapshot()

	snap, err := f.Snapshot()
	require.NoError(t, err)
	done := make(chan *memSink)
	go func() {
		sink := &memSink{}
		assert.NoError(t, snap.Persist(sink))
		done <- sink
	}()
	applyInBatches(t, f, logs[2000:], rng, 20)
	// Reclaim far in the future deletes every bucket that refills.
	f.ApplyCommand(fsm.Encode(fsm.Reclaim{Stamp: t0 + int64(1000*time.Hour)}))
	sink := <-done
	snap.Release()
	assert.Equal(t, want, sink.buf.Bytes(), "the snapshot changed while applies went on")

	// The live state is the one replaying every entry gives.
	replay := newFSM(t, snapshotOpts)
	applyInBatches(t, replay, logs, rng, 50)
	replay.ApplyCommand(fsm.Encode(fsm.Reclaim{Stamp: t0 + int64(1000*time.Hour)}))
	assert.Equal(t, replay.MarshalSnapshot(), f.MarshalSnapshot())
}
