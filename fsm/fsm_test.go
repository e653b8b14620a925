package fsm_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// t0 is an arbitrary fixed group time (nanoseconds since the epoch).
const t0 = int64(1_700_000_000) * int64(time.Second)

func at(d time.Duration) int64 { return t0 + int64(d) }

func newFSM(t *testing.T, opts fsm.Options) *fsm.FSM {
	t.Helper()
	f, err := fsm.New(opts)
	require.NoError(t, err)
	return f
}

// apply encodes c, applies it and returns its result as an R.
func apply[R any](t *testing.T, f *fsm.FSM, c fsm.Command) R {
	t.Helper()
	res := f.ApplyCommand(fsm.Encode(c))
	r, ok := res.(R)
	require.True(t, ok, "ApplyCommand(%T) returned %T", c, res)
	return r
}

func allowOne(t *testing.T, f *fsm.FSM, stamp int64, r fsm.AllowRequest) fsm.Decision {
	t.Helper()
	res := apply[*fsm.AllowResult](t, f, fsm.Allow{Stamp: stamp, Requests: []fsm.AllowRequest{r}})
	require.Len(t, res.Decisions, 1)
	return res.Decisions[0]
}

func setTierOp(name string, p bucket.Policy) fsm.ConfigOp {
	return fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: name, Policy: p}
}

func policy(capacity int64, rate int64) bucket.Policy {
	return bucket.Policy{Capacity: capacity, Rate: rate}
}

// outcome is the part of a Decision a step checks.
type outcome struct {
	Allowed   bool
	Remaining int64 // whole tokens
	Tier      string
	Limit     int64
	Duplicate bool
}

// step applies cmd (if set), then, if client is set, one decision at t0+at.
type step struct {
	cmd    fsm.Command
	at     time.Duration
	client string
	cost   int64
	id     string
	want   outcome
}

func runSteps(t *testing.T, f *fsm.FSM, steps []step) {
	t.Helper()
	for i, st := range steps {
		if st.cmd != nil {
			res := f.ApplyCommand(fsm.Encode(st.cmd))
			if cr, ok := res.(*fsm.ConfigResult); ok {
				require.NoError(t, cr.Err, "step %d: %+v", i, st.cmd)
			}
		}
		if st.client == "" {
			continue
		}
		d := allowOne(t, f, at(st.at), fsm.AllowRequest{Client: st.client, Cost: st.cost, RequestID: st.id})
		got := outcome{d.Allowed, d.RemainingTokens(), d.Tier, d.Limit, d.Duplicate}
		assert.Equal(t, st.want, got, "step %d: allow(%s, t=%v, cost %d, id %q) = %+v, want %+v",
			i, st.client, st.at, st.cost, st.id, got, st.want)
	}
}

func TestNewRefusesInvalidDefault(t *testing.T) {
	_, err := fsm.New(fsm.Options{Default: policy(0, bucket.Scale)})
	assert.ErrorIs(t, err, bucket.ErrInvalidPolicy)
	f := newFSM(t, fsm.Options{})
	assert.Equal(t, bucket.BuiltinDefault, f.Config().Default, "zero Options use the built-in default")
}

// TestWorkedExample is README.md's worked example ("Try it"), through the
// FSM.
func TestWorkedExample(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(3, bucket.Scale)})
	const s = time.Second
	runSteps(t, f, []step{
		{cmd: setTierOp("free", policy(5, bucket.Scale))},
		{cmd: fsm.SetTier{Client: "alice", Tier: "free"}},
		// t=0: five admitted, the sixth denied.
		{at: 0, client: "alice", cost: 1, want: outcome{true, 4, "free", 5, false}},
		{at: 0, client: "alice", cost: 1, want: outcome{true, 3, "free", 5, false}},
		{at: 0, client: "alice", cost: 1, want: outcome{true, 2, "free", 5, false}},
		{at: 0, client: "alice", cost: 1, want: outcome{true, 1, "free", 5, false}},
		{at: 0, client: "alice", cost: 1, want: outcome{true, 0, "free", 5, false}},
		{at: 0, client: "alice", cost: 1, want: outcome{false, 0, "free", 5, false}},
		// t=2: two admitted, the third denied.
		{at: 2 * s, client: "alice", cost: 1, want: outcome{true, 1, "free", 5, false}},
		{at: 2 * s, client: "alice", cost: 1, want: outcome{true, 0, "free", 5, false}},
		{at: 2 * s, client: "alice", cost: 1, want: outcome{false, 0, "free", 5, false}},
		// Raise free to 10: the balance continues from 0, not 10.
		{cmd: setTierOp("free", policy(10, bucket.Scale)), at: 2 * s, client: "alice", cost: 0, want: outcome{true, 0, "free", 10, false}},
		{at: 5 * s, client: "alice", cost: 0, want: outcome{true, 3, "free", 10, false}},
		// Lower free to 2: clamped to 2 at once.
		{cmd: setTierOp("free", policy(2, bucket.Scale)), at: 5 * s, client: "alice", cost: 0, want: outcome{true, 2, "free", 2, false}},
		{at: 5 * s, client: "alice", cost: 1, want: outcome{true, 1, "free", 2, false}},
		{at: 5 * s, client: "alice", cost: 1, want: outcome{true, 0, "free", 2, false}},
		{at: 5 * s, client: "alice", cost: 1, want: outcome{false, 0, "free", 2, false}},
		// A client with no tier, or a tier that does not exist, uses the default.
		{at: 5 * s, client: "bob", cost: 1, want: outcome{true, 2, bucket.DefaultTierName, 3, false}},
		{cmd: fsm.SetTier{Client: "carol", Tier: "gold"}, at: 5 * s, client: "carol", cost: 2, want: outcome{true, 1, bucket.DefaultTierName, 3, false}},
		// Removing alice's assignment moves her to the default; her balance carries over.
		{cmd: fsm.SetTier{Client: "alice"}, at: 5 * s, client: "alice", cost: 0, want: outcome{true, 0, bucket.DefaultTierName, 3, false}},
	})
}

// A stamp behind the group's high-water time is decided at the high water.
func TestHighWaterTime(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(2, bucket.Scale)})
	const s = time.Second
	tests := []struct {
		stamp   int64
		now     int64 // group time the decision must report
		cost    int64
		allowed bool
		rem     int64 // tokens
	}{
		{at(10 * s), at(10 * s), 2, true, 0},
		{at(5 * s), at(10 * s), 1, false, 0}, // backwards: no refill
		{0, at(10 * s), 1, false, 0},         // the epoch
		{-t0, at(10 * s), 1, false, 0},       // before the epoch
		{at(11 * s), at(11 * s), 1, true, 0}, // one second after the high water
		{at(11 * s), at(11 * s), 0, true, 0}, // same time again
		{at(12*s) - 1, at(12*s) - 1, 1, false, 0},
		{at(12 * s), at(12 * s), 1, true, 0},
	}
	for i, tt := range tests {
		d := allowOne(t, f, tt.stamp, fsm.AllowRequest{Client: "c", Cost: tt.cost})
		assert.Equal(t, tt.now, d.Stamp, "step %d: allow(stamp %d).Stamp = %d, want %d", i, tt.stamp, d.Stamp, tt.now)
		assert.Equal(t, tt.allowed, d.Allowed, "step %d: allow(stamp %d, cost %d).Allowed = %v, want %v", i, tt.stamp, tt.cost, d.Allowed, tt.allowed)
		assert.Equal(t, tt.rem, d.RemainingTokens(), "step %d: allow(stamp %d, cost %d) remaining = %d, want %d", i, tt.stamp, tt.cost, d.RemainingTokens(), tt.rem)
		assert.Equal(t, tt.now, f.HighWater(), "step %d: HighWater", i)
	}

	// A reclaim moves the high water forward, never back.
	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(s)})
	assert.Equal(t, at(12*s), f.HighWater(), "a backward reclaim stamp must not lower the high water")
	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(14 * s)})
	assert.Equal(t, at(14*s), f.HighWater())
	d := allowOne(t, f, at(13*s), fsm.AllowRequest{Client: "c", Cost: 2})
	assert.Equal(t, at(14*s), d.Stamp)
	assert.True(t, d.Allowed, "two seconds after the last decision the bucket holds 2")
}

func TestDedup(t *testing.T) {
	w := time.Duration(fsm.DefaultDedupWindow)
	// Rate 0, so every fresh decision shows in the balance.
	t.Run("window", func(t *testing.T) {
		f := newFSM(t, fsm.Options{Default: policy(5, 0)})
		def := bucket.DefaultTierName
		runSteps(t, f, []step{
			{at: 0, client: "alice", cost: 1, id: "r1", want: outcome{true, 4, def, 5, false}},
			// The retry returns the original decision and takes nothing.
			{at: 0, client: "alice", cost: 1, id: "r1", want: outcome{true, 4, def, 5, true}},
			{at: 0, client: "alice", cost: 3, id: "r1", want: outcome{true, 4, def, 5, true}},
			{at: 0, client: "alice", cost: 0, want: outcome{true, 4, def, 5, false}},
			// The same id on another client is independent.
			{at: 0, client: "bob", cost: 2, id: "r1", want: outcome{true, 3, def, 5, false}},
			{at: 0, client: "bob", cost: 2, id: "r1", want: outcome{true, 3, def, 5, true}},
			// A denied decision is remembered too.
			{at: 0, client: "bob", cost: 9, id: "r2", want: outcome{false, 3, def, 5, false}},
			{at: 0, client: "bob", cost: 1, id: "r2", want: outcome{false, 3, def, 5, true}},
			// Remembered for the whole window of group time...
			{at: w, client: "alice", cost: 1, id: "r1", want: outcome{true, 4, def, 5, true}},
			// ...and forgotten one nanosecond after it, with nothing applied in between.
			{at: w + 1, client: "alice", cost: 1, id: "r1", want: outcome{true, 3, def, 5, false}},
			{at: w + 1, client: "alice", cost: 1, id: "r1", want: outcome{true, 3, def, 5, true}},
		})
	})
	t.Run("reclaim does not change what is remembered", func(t *testing.T) {
		f := newFSM(t, fsm.Options{Default: policy(5, 0)})
		allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, RequestID: "x"})
		res := apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(w)})
		assert.Zero(t, res.Dedup, "an entry exactly one window old is still remembered")
		d := allowOne(t, f, at(w), fsm.AllowRequest{Client: "a", Cost: 1, RequestID: "x"})
		assert.True(t, d.Duplicate)
		res = apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(w + 1)})
		assert.Equal(t, 1, res.Dedup)
		_, _, ids := f.Stats()
		assert.Zero(t, ids)
	})
	t.Run("count bound evicts oldest first", func(t *testing.T) {
		f := newFSM(t, fsm.Options{Default: policy(5, 0), DedupMax: 3})
		def := bucket.DefaultTierName
		runSteps(t, f, []step{
			{client: "a", cost: 1, id: "1", want: outcome{true, 4, def, 5, false}},
			{client: "a", cost: 1, id: "2", want: outcome{true, 3, def, 5, false}},
			{client: "a", cost: 1, id: "3", want: outcome{true, 2, def, 5, false}},
			{client: "a", cost: 1, id: "4", want: outcome{true, 1, def, 5, false}}, // evicts 1
			{client: "a", cost: 1, id: "2", want: outcome{true, 3, def, 5, true}},
			{client: "a", cost: 1, id: "3", want: outcome{true, 2, def, 5, true}},
			{client: "a", cost: 1, id: "4", want: outcome{true, 1, def, 5, true}},
			{client: "a", cost: 1, id: "1", want: outcome{true, 0, def, 5, false}},  // fresh; evicts 2
			{client: "a", cost: 1, id: "2", want: outcome{false, 0, def, 5, false}}, // fresh; evicts 3
			{client: "a", cost: 1, id: "4", want: outcome{true, 1, def, 5, true}},
			{client: "a", cost: 1, id: "3", want: outcome{false, 0, def, 5, false}},
		})
		_, _, ids := f.Stats()
		assert.Equal(t, 3, ids)
	})
	t.Run("within one batch", func(t *testing.T) {
		f := newFSM(t, fsm.Options{Default: policy(5, 0)})
		res := apply[*fsm.AllowResult](t, f, fsm.Allow{Stamp: at(0), Requests: []fsm.AllowRequest{
			{Client: "a", Cost: 2, RequestID: "x"},
			{Client: "a", Cost: 2, RequestID: "x"},
			{Client: "a", Cost: 2},
		}})
		require.Len(t, res.Decisions, 3)
		want := res.Decisions[0]
		want.Duplicate = true
		want.Rate, want.RateKnown = 0, false // the base cluster version remembers no rate
		assert.Equal(t, want, res.Decisions[1])
		assert.Equal(t, int64(1), res.Decisions[2].RemainingTokens(), "the duplicate took nothing")
	})
}

func TestInstallConfigOnlyNewer(t *testing.T) {
	f := newFSM(t, fsm.Options{})
	mk := func(version uint64, capacity int64) bucket.Config {
		return bucket.Config{Version: version, Default: policy(capacity, bucket.Scale), Tiers: map[string]bucket.Policy{"pro": policy(capacity*10, 0)}}
	}
	tests := []struct {
		install     bucket.Config
		wantChanged bool
		wantConfig  bucket.Config
	}{
		{mk(5, 1), true, mk(5, 1)},
		{mk(5, 2), false, mk(5, 1)}, // same version, other content: ignored
		{mk(3, 3), false, mk(5, 1)},
		{mk(0, 4), false, mk(5, 1)},
		{mk(6, 5), true, mk(6, 5)},
		{mk(100, 6), true, mk(100, 6)},
	}
	for i, tt := range tests {
		res := apply[*fsm.ConfigResult](t, f, fsm.InstallConfig{Config: tt.install})
		assert.NoError(t, res.Err)
		assert.Equal(t, tt.wantChanged, res.Changed, "step %d: install(v%d).Changed", i, tt.install.Version)
		assert.Equal(t, tt.wantConfig.Version, res.Version, "step %d: install(v%d).Version", i, tt.install.Version)
		assert.True(t, tt.wantConfig.Equal(f.Config()), "step %d: install(v%d): config %+v, want %+v", i, tt.install.Version, f.Config(), tt.wantConfig)
	}
	// A ConfigOp continues from the installed version.
	res := apply[*fsm.ConfigResult](t, f, setTierOp("free", policy(1, 0)))
	assert.Equal(t, uint64(101), res.Version)
}

func TestConfigOps(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(3, bucket.Scale)})
	tests := []struct {
		op      fsm.ConfigOp
		wantErr error // nil: applied, version bumped
	}{
		{setTierOp("free", policy(5, bucket.Scale)), nil},
		{setTierOp("free", policy(0, bucket.Scale)), bucket.ErrInvalidPolicy},
		{setTierOp("free", policy(5, -1)), bucket.ErrInvalidPolicy},
		{setTierOp("free", policy(5, bucket.MaxRate+1)), bucket.ErrInvalidPolicy},
		{setTierOp("free", policy(bucket.MaxCapacity+1, 0)), bucket.ErrInvalidPolicy},
		{setTierOp("Free", policy(5, 0)), bucket.ErrInvalidTierName},
		{setTierOp("", policy(5, 0)), bucket.ErrInvalidTierName},
		{setTierOp(bucket.DefaultTierName, policy(5, 0)), bucket.ErrInvalidTierName},
		{setTierOp("pro", policy(bucket.MaxCapacity, bucket.MaxRate)), nil},
		{fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "ghost"}, fsm.ErrNoSuchTier},
		{fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "pro"}, nil},
		{fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: "pro"}, fsm.ErrNoSuchTier},
		{fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: policy(0, 0)}, bucket.ErrInvalidPolicy},
		{fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: policy(1, -5)}, bucket.ErrInvalidPolicy},
		{fsm.ConfigOp{Kind: fsm.OpSetDefault, Policy: policy(7, 0)}, nil},
	}
	for i, tt := range tests {
		before := f.Config()
		res := apply[*fsm.ConfigResult](t, f, tt.op)
		after := f.Config()
		if tt.wantErr == nil {
			assert.NoError(t, res.Err, "step %d: %+v", i, tt.op)
			assert.True(t, res.Changed, "step %d: %+v Changed", i, tt.op)
			assert.Equal(t, before.Version+1, res.Version, "step %d: %+v Version", i, tt.op)
			assert.Equal(t, before.Version+1, after.Version, "step %d: %+v config version", i, tt.op)
			continue
		}
		assert.ErrorIs(t, res.Err, tt.wantErr, "step %d: %+v", i, tt.op)
		assert.False(t, res.Changed, "step %d: %+v Changed", i, tt.op)
		assert.Equal(t, before.Version, res.Version, "step %d: %+v Version", i, tt.op)
		assert.True(t, before.Equal(after), "step %d: %+v changed the config to %+v", i, tt.op, after)
	}
	want := bucket.Config{Version: 4, Default: policy(7, 0), Tiers: map[string]bucket.Policy{"free": policy(5, bucket.Scale)}}
	assert.True(t, want.Equal(f.Config()), "final config %+v, want %+v", f.Config(), want)
}

func TestSetTierReportsPrevious(t *testing.T) {
	f := newFSM(t, fsm.Options{})
	tests := []struct {
		set          fsm.SetTier
		wantPrevious string
	}{
		{fsm.SetTier{Client: "a", Tier: "free"}, ""},
		{fsm.SetTier{Client: "a", Tier: "pro"}, "free"},
		{fsm.SetTier{Client: "b", Tier: "nonexistent"}, ""},
		{fsm.SetTier{Client: "a"}, "pro"},
		{fsm.SetTier{Client: "a"}, ""},
		{fsm.SetTier{Client: "b", Tier: "free"}, "nonexistent"},
	}
	for i, tt := range tests {
		res := apply[*fsm.SetTierResult](t, f, tt.set)
		assert.Equal(t, tt.wantPrevious, res.Previous, "step %d: %+v.Previous = %q, want %q", i, tt.set, res.Previous, tt.wantPrevious)
	}
	_, assignments, _ := f.Stats()
	assert.Equal(t, 1, assignments, "removing an assignment forgets it")
	assert.Equal(t, "free", f.View("b", 0).AssignedTier)
	assert.Empty(t, f.View("a", 0).AssignedTier)
}

func TestApplyPanicsOnBadEntries(t *testing.T) {
	valid := fsm.Encode(fsm.Reclaim{Stamp: 1})
	tests := map[string][]byte{
		"unknown type":      {fsm.EnvelopeVersion, 99},
		"type zero":         {fsm.EnvelopeVersion, 0},
		"envelope version":  {fsm.EnvelopeVersion + 1, byte(fsm.TypeReclaim), 0},
		"empty":             {},
		"one byte":          {fsm.EnvelopeVersion},
		"truncated payload": valid[:2],
		"trailing byte":     append(valid, 0),
	}
	for name, data := range tests {
		f := newFSM(t, fsm.Options{})
		before := f.MarshalSnapshot()
		assert.Panics(t, func() { f.ApplyCommand(data) }, "ApplyCommand(%s)", name)
		assert.Equal(t, before, f.MarshalSnapshot(), "%s: state changed", name)
		assert.Panics(t, func() { f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data}) }, "Apply(%s)", name)
	}
}

// A committed entry that decodes but breaks its version's rules (a forged
// or buggy proposal) is refused the same way on every replica, changes
// nothing, and never panics: a panic would take down every replica, again at
// every restart.
func TestApplyRejectsInvalidContent(t *testing.T) {
	long := strings.Repeat("c", fsm.MaxClientLen+44)
	many := make([]fsm.AllowRequest, fsm.MaxBatch+1)
	for i := range many {
		many[i] = fsm.AllowRequest{Client: "x", Cost: 1}
	}
	tests := map[string]fsm.Command{
		"unknown op kind":       fsm.ConfigOp{Kind: 9, Tier: "x"},
		"300-byte client tier":  fsm.SetTier{Client: long, Tier: "free"},
		"empty client tier":     fsm.SetTier{Tier: "free"},
		"65-byte tier name":     fsm.SetTier{Client: "a", Tier: strings.Repeat("t", bucket.MaxTierNameLen+1)},
		"300-byte client allow": fsm.Allow{Stamp: 1, Requests: []fsm.AllowRequest{{Client: "ok", Cost: 1}, {Client: long, Cost: 1}}},
		"cost above the limit":  fsm.Allow{Stamp: 1, Requests: []fsm.AllowRequest{{Client: "a", Cost: bucket.MaxCost + 1}}},
		"long request id":       fsm.Allow{Stamp: 1, Requests: []fsm.AllowRequest{{Client: "a", Cost: 1, RequestID: strings.Repeat("r", fsm.MaxRequestIDLen+1)}}},
		"batch above the limit": fsm.Allow{Stamp: 1, Requests: many},
		"invalid default":       fsm.InstallConfig{Config: bucket.Config{Version: 7, Default: bucket.Policy{Capacity: 0, Rate: 1}}},
		"long tier in op":       fsm.ConfigOp{Kind: fsm.OpDeleteTier, Tier: strings.Repeat("t", 65)},
	}
	for name, c := range tests {
		require.ErrorIs(t, fsm.Validate(c), fsm.ErrInvalidCommand, "%s: Validate", name)
		data := fsm.Encode(c)
		_, err := fsm.Decode(data)
		assert.ErrorIs(t, err, fsm.ErrInvalidCommand, "%s: Decode", name)

		f := newFSM(t, fsm.Options{})
		before := f.MarshalSnapshot()
		var res any
		require.NotPanics(t, func() { res = f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data}) }, name)
		rej, ok := res.(*fsm.Rejected)
		if assert.True(t, ok, "%s: result %T, want *fsm.Rejected", name, res) {
			assert.ErrorIs(t, rej.Err, fsm.ErrInvalidCommand, name)
		}
		after := f.MarshalSnapshot()
		// Only the applied index moves.
		f2 := newFSM(t, fsm.Options{})
		f2.Apply(&raft.Log{Index: 1, Type: raft.LogNoop})
		assert.Equal(t, f2.MarshalSnapshot(), after, "%s: state changed", name)
		assert.NotEqual(t, before, after, "%s: the index was recorded", name)
	}
}

func TestApplyBatchResults(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, bucket.Scale)})
	logs := []*raft.Log{
		{Index: 1, Type: raft.LogConfiguration, Data: []byte{0xff, 0xfe}}, // raft's, not ours: never decoded
		{Index: 2, Type: raft.LogCommand, Data: fsm.Encode(fsm.Allow{Stamp: at(0), Requests: []fsm.AllowRequest{{Client: "a", Cost: 2}, {Client: "b", Cost: 1}}})},
		{Index: 3, Type: raft.LogNoop},
		{Index: 4, Type: raft.LogCommand, Data: fsm.Encode(setTierOp("free", policy(5, 0)))},
		{Index: 5, Type: raft.LogBarrier},
		{Index: 6, Type: raft.LogCommand, Data: fsm.Encode(fsm.SetTier{Client: "a", Tier: "free"})},
		{Index: 7, Type: raft.LogCommand, Data: fsm.Encode(fsm.Reclaim{Stamp: at(time.Hour)})},
		{Index: 8, Type: raft.LogCommand, Data: fsm.Encode(fsm.InstallConfig{Config: bucket.Config{Version: 1, Default: policy(1, 1)}})},
	}
	out := f.ApplyBatch(logs)
	require.Len(t, out, len(logs))
	for _, i := range []int{0, 2, 4} {
		assert.Nil(t, out[i], "result of %v entry %d", logs[i].Type, logs[i].Index)
	}
	if ar, ok := out[1].(*fsm.AllowResult); assert.True(t, ok, "entry 2: %T", out[1]) {
		require.Len(t, ar.Decisions, 2)
		assert.Equal(t, int64(3), ar.Decisions[0].RemainingTokens())
		assert.Equal(t, int64(4), ar.Decisions[1].RemainingTokens())
	}
	if cr, ok := out[3].(*fsm.ConfigResult); assert.True(t, ok, "entry 4: %T", out[3]) {
		assert.Equal(t, &fsm.ConfigResult{Version: 1, Changed: true}, cr)
	}
	assert.Equal(t, &fsm.SetTierResult{}, out[5])
	assert.Equal(t, &fsm.ReclaimResult{Buckets: 1}, out[6], "b is full after an hour; a is at 0 under free (rate 0)")
	assert.Equal(t, &fsm.ConfigResult{Version: 1}, out[7], "an equal version is not installed")
	assert.Equal(t, uint64(8), f.AppliedIndex())

	// Apply is ApplyBatch of one.
	res := f.Apply(&raft.Log{Index: 9, Type: raft.LogCommand, Data: fsm.Encode(fsm.SetTier{Client: "a"})})
	assert.Equal(t, &fsm.SetTierResult{Previous: "free"}, res)
	assert.Equal(t, uint64(9), f.AppliedIndex())
	assert.Nil(t, f.Apply(&raft.Log{Index: 10, Type: raft.LogNoop}))
	assert.Equal(t, uint64(10), f.AppliedIndex())
	assert.Empty(t, f.ApplyBatch(nil))

	// ApplyCommand does no index bookkeeping.
	apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "z", Tier: "x"})
	assert.Equal(t, uint64(10), f.AppliedIndex())
}

func TestViewDoesNotConsume(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(5, bucket.Scale)})
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 3})

	for range 3 {
		v := f.View("a", at(0))
		assert.True(t, v.Known)
		assert.Equal(t, int64(2), v.Decision.RemainingTokens())
		assert.True(t, v.Decision.Allowed, "a cost-1 request would be allowed")
	}
	v := f.View("a", at(time.Second))
	assert.Equal(t, int64(3), v.Decision.RemainingTokens(), "a view later in time shows the refill")
	assert.Equal(t, at(time.Second), v.At)
	v = f.View("a", at(-time.Hour))
	assert.Equal(t, at(0), v.At, "a view before the high water is at the high water")
	assert.Equal(t, int64(2), v.Decision.RemainingTokens())
	assert.Equal(t, at(0), f.HighWater(), "a view does not move group time")

	// An unknown client is full and stays unknown.
	v = f.View("nobody", at(0))
	assert.False(t, v.Known)
	assert.Equal(t, int64(5), v.Decision.RemainingTokens())
	assert.Equal(t, bucket.DefaultTierName, v.Tier)
	assert.Equal(t, policy(5, bucket.Scale), v.Policy)
	buckets, _, _ := f.Stats()
	assert.Equal(t, 1, buckets, "View must not create a bucket")

	// The next decision sees the balance the views did not touch.
	d := allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 2})
	assert.True(t, d.Allowed)
	assert.Equal(t, int64(0), d.RemainingTokens())
	d = allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1})
	assert.False(t, d.Allowed)
}

// When a group holds the most request ids it may remember, the oldest are
// forgotten before their window ends: counted, so operators see that
// retries of those ids would be decided afresh.
func TestRequestIDsEvictedEarlyAreCounted(t *testing.T) {
	f := newFSM(t, fsm.Options{DedupMax: 3})
	allow := func(id string) fsm.Decision {
		res := f.ApplyCommand(fsm.Encode(fsm.Allow{Stamp: at(0), Requests: []fsm.AllowRequest{{Client: "a", Cost: 1, RequestID: id}}}))
		return res.(*fsm.AllowResult).Decisions[0]
	}
	for _, id := range []string{"r1", "r2", "r3", "r4", "r5"} {
		require.False(t, allow(id).Duplicate, id)
	}
	assert.Equal(t, uint64(2), f.RequestIDsEvictedEarly(), "r1 and r2 were forgotten within their window")
	again := allow("r1")
	assert.False(t, again.Duplicate, "a forgotten id is decided afresh...")
	assert.True(t, again.MaybeDuplicate, "...and says it may have been decided before")
	assert.True(t, allow("r5").Duplicate, "a remembered id is not")
	assert.Equal(t, uint64(3), f.RequestIDsEvictedEarly(), "remembering r1 again forgot r3")
}

// Until the window of the ids forgotten early has passed, every fresh
// decision for an id the group does not remember says it may be a
// duplicate; after it, and before any early forgetting, none does.
func TestMaybeDuplicateLastsTheForgottenIDsWindow(t *testing.T) {
	w := time.Duration(fsm.DefaultDedupWindow)
	f := newFSM(t, fsm.Options{DedupMax: 2})
	allow := func(at time.Duration, id string) fsm.Decision {
		return allowOne(t, f, t0+int64(at), fsm.AllowRequest{Client: "a", Cost: 0, RequestID: id})
	}
	assert.False(t, allow(0, "r1").MaybeDuplicate)
	assert.False(t, allow(time.Second, "r2").MaybeDuplicate)
	assert.False(t, allow(2*time.Second, "r3").MaybeDuplicate, "forgetting r1 now does not make r3 doubtful")
	assert.True(t, allow(3*time.Second, "new").MaybeDuplicate, "r1 was forgotten early: any unknown id may be it")
	assert.False(t, allowOne(t, f, t0+int64(3*time.Second), fsm.AllowRequest{Client: "a", Cost: 0}).MaybeDuplicate, "no id, no doubt")
	// "new" (at 3 s) forgot r2 (decided at 1 s): doubt lasts until 1 s + w.
	assert.True(t, allow(w+time.Second, "x").MaybeDuplicate)
	g := newFSM(t, fsm.Options{DedupMax: 2})
	require.NoError(t, g.Restore(io.NopCloser(bytes.NewReader(f.MarshalSnapshot()))))
	assert.Equal(t, f.MarshalSnapshot(), g.MarshalSnapshot(), "the doubt is part of the replicated state")
	assert.False(t, allow(w+3*time.Second+1, "y").MaybeDuplicate, "every id forgotten early is past its window")
}
