package history

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const t0 = int64(1_700_000_000_000_000_000)

func sample() History {
	return History{
		Ops: []Op{
			{Process: 0, Key: "a", Node: "n1", Kind: KindAllow, Cost: 1, RequestID: "p0-0", Invoke: t0, Complete: t0 + 5, Outcome: OutcomeOK, Allowed: true, Remaining: 4, Limit: 5, Tier: "free", Stamp: t0 + 2},
			{Process: 1, Key: "b", Node: "n2", Kind: KindAllow, Cost: 2, RequestID: "p1-0", Invoke: t0 + 1, Complete: t0 + 9, Outcome: OutcomeInfo, Probe: ""},
			{Process: 0, Key: "a", Node: "n3", Kind: KindAllow, Cost: 1, RequestID: "p0-0", Invoke: t0 + 6, Complete: t0 + 8, Outcome: OutcomeOK, Allowed: true, Remaining: 4, Limit: 5, Tier: "free", Stamp: t0 + 2, Duplicate: true},
		},
		Events: []Event{
			{Time: t0 + 3, Kind: KindNemesis, Name: "kill n2", Phase: PhaseStart, Detail: map[string]string{"z": "1", "a": "2"}},
			{Time: t0 + 7, Kind: KindNemesis, Name: "kill n2", Phase: PhaseStop},
		},
		Policies: []Policy{
			{Time: t0 + 4, Tier: "free", Capacity: 10, RatePerSec: "0.5", Version: 3, Acked: true, Invoke: t0 + 2, OnRaise: "fill"},
			{Time: t0 + 4, Tier: "win", Algorithm: "sliding_window", Limit: 20, WindowSeconds: 5, Version: 4, Acked: true, Invoke: t0 + 3},
		},
		Assignments: []Assignment{
			{Time: t0 + 5, Invoke: t0 + 3, Key: "a", Tier: "hot", Acked: true},
			{Time: t0 + 8, Invoke: t0 + 6, Key: "a", Tier: ""},
		},
		ClockOffsets: map[string]int64{"n2": 250e6, "n1": 0},
		Meta:         map[string]string{"seed": "42", "nodes": "3"},
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	h := sample()
	require.NoError(t, h.Write(dir))
	got, err := Read(dir)
	require.NoError(t, err)
	assert.Equal(t, h, got)

	// Deterministic: writing again gives the same bytes.
	first := readAll(t, dir)
	dir2 := t.TempDir()
	require.NoError(t, got.Write(dir2))
	assert.Equal(t, first, readAll(t, dir2))
	for _, name := range []string{OpsFile, EventsFile, PoliciesFile, AssignmentsFile, MetaFile} {
		assert.Contains(t, first, name)
	}
	assert.Len(t, first, 5, "no temporary files left behind")
	info, err := os.Stat(filepath.Join(dir, OpsFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm())
}

// TestReadsHistoriesWithoutWindowFields: a history written before the
// window and fill fields existed reads as token buckets with on_raise keep.
func TestReadsHistoriesWithoutWindowFields(t *testing.T) {
	dir := t.TempDir()
	h := sample()
	h.Ops = append(h.Ops, Op{Process: 2, Key: "w", Node: "n1", Kind: KindAllow, Cost: 1, RequestID: "p2-0", Invoke: t0 + 7, Complete: t0 + 9,
		Outcome: OutcomeOK, Allowed: true, Remaining: 19, Limit: 20, Tier: "win", WindowSeconds: 5, Stamp: t0 + 8})
	require.NoError(t, h.Write(dir))
	back, err := Read(dir)
	require.NoError(t, err)
	assert.Equal(t, h, back, "the window and fill fields round-trip")
	old := `{"time":4,"tier":"free","capacity":10,"rate_per_sec":"0.5","version":3,"acked":true,"invoke":2}` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, PoliciesFile), []byte(old), 0o644))
	got, err := Read(dir)
	require.NoError(t, err)
	require.Len(t, got.Policies, 1)
	assert.Equal(t, Policy{Time: 4, Tier: "free", Capacity: 10, RatePerSec: "0.5", Version: 3, Acked: true, Invoke: 2}, got.Policies[0])
	data, err := os.ReadFile(filepath.Join(dir, PoliciesFile))
	require.NoError(t, err)
	require.NoError(t, got.Write(dir))
	again, err := os.ReadFile(filepath.Join(dir, PoliciesFile))
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again), "the new fields are omitted when empty")
}

func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := make(map[string]string)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = string(b)
	}
	return out
}

func TestReadMissingOptionalFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, OpsFile), []byte(`{"key":"a","kind":"allow","outcome":"ok"}`+"\n\n"), 0o644))
	h, err := Read(dir)
	require.NoError(t, err)
	require.Len(t, h.Ops, 1)
	assert.Equal(t, "a", h.Ops[0].Key)
	assert.Empty(t, h.Events)
	assert.Empty(t, h.Assignments)

	_, err = Read(t.TempDir())
	assert.Error(t, err, "ops.jsonl is required")

	require.NoError(t, os.WriteFile(filepath.Join(dir, EventsFile), []byte("{not json\n"), 0o644))
	_, err = Read(dir)
	assert.ErrorContains(t, err, "events.jsonl line 1")
}

func TestOpsByKeyAndKeys(t *testing.T) {
	h := sample()
	by := h.OpsByKey()
	require.Len(t, by["a"], 2)
	assert.Equal(t, "n1", by["a"][0].Node, "history order is kept")
	assert.Equal(t, "n3", by["a"][1].Node)
	assert.Len(t, by["b"], 1)
	assert.Equal(t, []string{"a", "b"}, h.Keys())
}

func TestNemesisIntervals(t *testing.T) {
	ev := func(at int64, name, phase string) Event {
		return Event{Time: t0 + at, Kind: KindNemesis, Name: name, Phase: phase}
	}
	h := History{
		Ops: []Op{{Key: "a", Kind: KindAllow, Outcome: OutcomeFail, Invoke: t0, Complete: t0 + 100}},
		Events: []Event{
			ev(30, "partition halves", PhaseStart),
			ev(10, "kill n2", PhaseStart), // out of order on purpose
			ev(20, "kill n2", PhaseStop),
			ev(25, "kill n2", PhaseStart),
			ev(40, "kill n2", PhaseStop),
			ev(50, "clock n1 +250ms", PhaseStop), // no start: ignored
			{Time: t0 + 60, Kind: "note", Name: "kill n3", Phase: PhaseStart},
		},
	}
	got := h.NemesisIntervals()
	want := []Interval{
		{Name: "kill n2", Start: t0 + 10, Stop: t0 + 20},
		{Name: "kill n2", Start: t0 + 25, Stop: t0 + 40},
		{Name: "partition halves", Start: t0 + 30, Stop: t0 + 100, Open: true},
	}
	assert.Equal(t, want, got)
	assert.True(t, got[0].Contains(t0+20))
	assert.False(t, got[0].Contains(t0+21))

	errs := h.Validate()
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs[0], "without a start")
}

func TestValidate(t *testing.T) {
	assert.Empty(t, sample().Validate())
	h := History{Ops: []Op{
		{Key: "", Kind: KindAllow, Outcome: OutcomeOK},
		{Key: "a", Kind: "cas", Outcome: OutcomeOK},
		{Key: "a", Kind: KindAllow, Outcome: "maybe"},
		{Key: "a", Kind: KindAllow, Outcome: OutcomeOK, Cost: -1},
		{Key: "a", Kind: KindAllow, Outcome: OutcomeOK, Invoke: 5, Complete: 4},
		{Key: "a", Kind: KindAllow, Outcome: OutcomeInfo, Duplicate: true, RequestID: "r"},
		{Key: "a", Kind: KindAllow, Outcome: OutcomeOK, Duplicate: true},
	}, Policies: []Policy{{Time: 1}}, Assignments: []Assignment{
		{Time: 1, Invoke: 1, Tier: "hot"},
		{Time: 1, Key: "a"},
		{Time: 1, Invoke: 2, Key: "a"},
	}}
	errs := h.Validate()
	require.Len(t, errs, 11)
	for i, want := range []string{"empty key", "unknown kind", "unknown outcome", "negative cost", "before it is invoked", "duplicate with outcome", "duplicate without a request id", "no tier",
		"assignment 0 has no key", "assignment 1 (key \"a\") has no invoke", "assignment 2 (key \"a\") ends at 1 before it is invoked"} {
		assert.ErrorContains(t, errs[i], want)
	}
}

func TestSpan(t *testing.T) {
	s, e := History{}.Span()
	assert.Zero(t, s)
	assert.Zero(t, e)
	s, e = sample().Span()
	assert.Equal(t, t0, s)
	assert.Equal(t, t0+9, e)
}

func TestOperations(t *testing.T) {
	h := History{Ops: []Op{
		{Key: "a", RequestID: "r1", Outcome: OutcomeInfo},
		{Key: "b", Outcome: OutcomeInfo},
		{Key: "a", RequestID: "r1", Outcome: OutcomeFail, Attempt: 1},
		{Key: "b", RequestID: "r1", Outcome: OutcomeFail},
		{Key: "a", RequestID: "r1", Outcome: OutcomeOK, Duplicate: true, Attempt: 2},
		{Key: "b", Outcome: OutcomeOK},
	}}
	ops := h.Operations()
	require.Len(t, ops, 4)
	assert.Equal(t, []int{0, 2, 4}, ops[0].Attempts, "attempts of one request id")
	assert.Equal(t, []int{1}, ops[1].Attempts, "no request id: an operation of its own")
	assert.Equal(t, []int{3}, ops[2].Attempts, "the same id on another key is another request")
	assert.Equal(t, []int{5}, ops[3].Attempts)
	var settled []string
	for _, o := range ops {
		settled = append(settled, h.Settled(o))
	}
	assert.Equal(t, []string{OutcomeOK, OutcomeInfo, OutcomeFail, OutcomeOK}, settled)
}
