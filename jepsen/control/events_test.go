//go:build linux

package control

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecorder(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	tick := t0
	r := recorder{now: func() time.Time { tick = tick.Add(time.Second); return tick }}
	r.record("kill", PhaseStart, map[string]string{"nodes": "n2"})
	r.record("kill", PhaseStop, nil)

	got := r.list()
	want := []Event{
		{Time: t0.Add(time.Second).UnixNano(), Name: "kill", Phase: PhaseStart, Detail: map[string]string{"nodes": "n2"}},
		{Time: t0.Add(2 * time.Second).UnixNano(), Name: "kill", Phase: PhaseStop},
	}
	assert.Equal(t, want, got)
	got[0].Detail["nodes"] = "changed"
	assert.Equal(t, "n2", r.list()[0].Detail["nodes"], "list returns a copy")

	b, err := json.Marshal(want[1])
	require.NoError(t, err)
	assert.JSONEq(t, `{"time": 1700000002000000000, "name": "kill", "phase": "stop"}`, string(b))
}

func TestRecorderConcurrent(t *testing.T) {
	r := recorder{now: time.Now}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				r.record("pause", PhaseStart, nil)
			}
		})
	}
	wg.Wait()
	evs := r.list()
	require.Len(t, evs, 800)
	for k := 1; k < len(evs); k++ {
		assert.LessOrEqual(t, evs[k-1].Time, evs[k].Time, "events are in time order")
	}
}

// fakeDebug stands in for the nodes' debug listeners: it keeps an offset
// per host and logs every PUT.
type fakeDebug struct {
	mu      sync.Mutex
	offsets map[string]int64
	puts    map[string][]int64
	status  int // when not 0, every answer has this status
}

func newFakeDebug() *fakeDebug {
	return &fakeDebug{offsets: map[string]int64{}, puts: map[string][]int64{}}
}

func (f *fakeDebug) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	answer := func(code int, body string) (*http.Response, error) {
		return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}, Request: r}, nil
	}
	if f.status != 0 {
		return answer(f.status, "nope")
	}
	if r.URL.Path != "/debug/clock" {
		return answer(http.StatusNotFound, "404 page not found")
	}
	host := r.URL.Host
	if r.Method == http.MethodPut {
		var b clockBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			return answer(http.StatusBadRequest, err.Error())
		}
		f.offsets[host] = b.OffsetNanos
		f.puts[host] = append(f.puts[host], b.OffsetNanos)
	}
	out, _ := json.Marshal(clockBody{OffsetNanos: f.offsets[host]})
	return answer(http.StatusOK, string(out))
}

func (f *fakeDebug) putsTo(host string) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.puts[host]...)
}

func fakeClockCluster(t *testing.T) (*Cluster, *fakeDebug) {
	t.Helper()
	c := testCluster(t, 3, true)
	f := newFakeDebug()
	c.http = &http.Client{Transport: f}
	return c, f
}

func TestClockBumps(t *testing.T) {
	c, f := fakeClockCluster(t)
	ctx := context.Background()
	require.NoError(t, c.SetClock(ctx, "clock-bump", 1, 100*time.Millisecond))
	require.NoError(t, c.SetClock(ctx, "clock-bump", 2, -300*time.Millisecond))
	require.NoError(t, c.SetClock(ctx, "clock-bump", 1, -50*time.Millisecond))

	off, err := c.Clock(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, -300*time.Millisecond, off)
	assert.Equal(t, []int64{100e6, -50e6}, f.putsTo("10.77.0.11:7079"))
	assert.Equal(t, map[string]int64{"n1": 100e6, "n2": 300e6, "n3": 0}, c.ClockOffsets(), "the largest |offset| per node")

	require.NoError(t, c.ResetClocks(ctx))
	evs := c.Events()
	require.Len(t, evs, 4)
	assert.Equal(t, Event{Time: evs[1].Time, Name: "clock-bump", Phase: PhaseStart,
		Detail: map[string]string{"node": "n2", "offset_ns": "-300000000"}}, evs[1])
	assert.Equal(t, PhaseStop, evs[3].Phase)
	assert.Equal(t, "clock-bump", evs[3].Name)

	require.NoError(t, c.ResetClocks(ctx))
	assert.Len(t, c.Events(), 4, "a second reset records nothing")

	f.status = http.StatusNotFound
	err = c.SetClock(ctx, "clock-bump", 3, time.Second)
	assert.ErrorContains(t, err, "faultinject")
	assert.Equal(t, int64(0), c.ClockOffsets()["n3"], "a failed set is not counted")
}

func TestClockStrobe(t *testing.T) {
	c, f := fakeClockCluster(t)
	ctx := context.Background()
	const host = "10.77.0.13:7079"
	require.NoError(t, c.StrobeClock(ctx, "clock-strobe", 3, 40*time.Millisecond, 2*time.Millisecond, 0))
	require.Eventually(t, func() bool { return len(f.putsTo(host)) >= 6 }, 5*time.Second, time.Millisecond)
	require.NoError(t, c.ResetClocks(ctx))
	puts := f.putsTo(host)
	for k, p := range puts {
		want := int64(40e6)
		if k%2 == 1 {
			want = -want
		}
		assert.Equal(t, want, p, "flip %d", k)
	}
	time.Sleep(20 * time.Millisecond)
	assert.Len(t, f.putsTo(host), len(puts), "no flip after ResetClocks")
	assert.Equal(t, int64(40e6), c.ClockOffsets()["n3"])

	// With a duration the strobe ends by itself.
	require.NoError(t, c.StrobeClock(ctx, "clock-strobe", 2, 10*time.Millisecond, time.Millisecond, 30*time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	n := len(f.putsTo("10.77.0.12:7079"))
	time.Sleep(20 * time.Millisecond)
	assert.Len(t, f.putsTo("10.77.0.12:7079"), n, "the strobe stopped after its duration")
	require.NoError(t, c.ResetClocks(ctx))

	assert.Error(t, c.StrobeClock(ctx, "clock-strobe", 1, 0, time.Millisecond, 0))
}

// fakeNemesis logs its calls into a shared log.
type fakeNemesis struct {
	name     string
	log      *[]string
	mu       *sync.Mutex
	startErr error
}

func (f fakeNemesis) nemesis() Nemesis {
	add := func(s string) {
		f.mu.Lock()
		*f.log = append(*f.log, s)
		f.mu.Unlock()
	}
	return Nemesis{
		Name: f.name,
		Start: func(ctx context.Context) error {
			add("start " + f.name)
			return f.startErr
		},
		Stop: func(ctx context.Context) error {
			if ctx.Err() != nil {
				add("stop " + f.name + " with a dead context")
			}
			add("stop " + f.name)
			return nil
		},
	}
}

func TestSchedule(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	boom := assert.AnError
	nemeses := []Nemesis{
		fakeNemesis{name: "a", log: &calls, mu: &mu}.nemesis(),
		fakeNemesis{name: "b", log: &calls, mu: &mu, startErr: boom}.nemesis(),
	}
	var events []Event
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	err := Schedule(context.Background(), nemeses, 5*time.Millisecond, 60*time.Millisecond, rng, func(e Event) { events = append(events, e) })
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)

	// Rounds: start X, stop X; then the final stop of every nemesis.
	require.GreaterOrEqual(t, len(calls), 2+2)
	final := calls[len(calls)-2:]
	assert.Equal(t, []string{"stop a", "stop b"}, final)
	rounds := calls[:len(calls)-2]
	require.Equal(t, 0, len(rounds)%2)
	for k := 0; k < len(rounds); k += 2 {
		name := strings.TrimPrefix(rounds[k], "start ")
		assert.Equal(t, "start "+name, rounds[k])
		assert.Equal(t, "stop "+name, rounds[k+1], "round %d stops what it started", k/2)
	}

	require.Len(t, events, len(rounds))
	for k, e := range events {
		want := PhaseStart
		if k%2 == 1 {
			want = PhaseStop
		}
		assert.Equal(t, want, e.Phase)
		if e.Name == "b" && e.Phase == PhaseStart {
			assert.Equal(t, boom.Error(), e.Detail["error"], "a failed start is recorded")
		} else {
			assert.Nil(t, e.Detail)
		}
		if k > 0 {
			assert.LessOrEqual(t, events[k-1].Time, e.Time)
		}
	}
}

func TestScheduleStopsWhenCancelled(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	nemeses := []Nemesis{fakeNemesis{name: "a", log: &calls, mu: &mu}.nemesis()}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	require.NoError(t, Schedule(ctx, nemeses, time.Hour, time.Hour, rand.New(rand.NewPCG(1, 2)), nil))
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, []string{"start a", "stop a", "stop a"}, calls, "stops run with a live context after cancel")

	assert.Error(t, Schedule(context.Background(), nil, time.Millisecond, time.Millisecond, rand.New(rand.NewPCG(1, 2)), nil))
}

func TestMixNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ns5 := testCluster(t, 5, true)
	nms, err := ns5.Mix(rng, NemesisNames()...)
	require.NoError(t, err)
	require.Len(t, nms, len(NemesisNames()))
	for k, nm := range nms {
		assert.Equal(t, NemesisNames()[k], nm.Name)
		assert.NotNil(t, nm.Start)
		assert.NotNil(t, nm.Stop)
	}

	_, err = ns5.Mix(rng, "kill", "flood")
	assert.ErrorContains(t, err, `"flood" (unknown)`)
	_, err = testCluster(t, 3, true).Mix(rng, "partition-ring")
	assert.ErrorContains(t, err, "unsupported")
	_, err = testCluster(t, 3, false).Mix(rng, "pause", "partition-halves")
	assert.ErrorContains(t, err, `"partition-halves" (unsupported here)`)
}

func TestPickAndShuffle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		got, err := pick(rng, []int{1, 2, 3, 4, 5}, 2)
		require.NoError(t, err)
		require.Len(t, got, 2)
		assert.NotEqual(t, got[0], got[1])
	}
	_, err := pick(rng, []int{1}, 2)
	assert.Error(t, err)
	_, err = pick(rng, nil, 1)
	assert.Error(t, err)
	assert.ElementsMatch(t, []int{1, 2, 3}, shuffled(rng, []int{1, 2, 3}))
}
