package checker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
)

// withPolicy returns params() whose default is pol.
func withPolicy(pol bucket.Policy) *Params {
	p := params()
	p.Default = pol
	return &p
}

// withChanges returns h with its policy changes set.
func withChanges(h history.History, changes ...history.Policy) history.History {
	h.Policies = changes
	return h
}

func TestLinearizable(t *testing.T) {
	m := func(n float64) time.Duration { return time.Duration(n * float64(msec)) }
	workedExample := []history.Op{
		allowed(0, m(0.5), 0, 4),
		allowed(m(1), m(1.5), m(1), 3),
		allowed(m(2), m(2.5), m(2), 2),
		allowed(m(3), m(3.5), m(3), 1),
		allowed(m(4), m(4.5), m(4), 0),
		denied(m(5), m(5.5), m(5), 0),
		// t=2s: 2 refilled (0.005 + 1.995), two admitted, the third denied.
		allowed(m(2000), m(2000.5), m(2000), 1),
		allowed(m(2001), m(2001.5), m(2001), 0),
		denied(m(2002), m(2002.5), m(2002), 0),
	}
	twoTokens := bucket.Policy{Capacity: 2}
	oneToken := bucket.Policy{Capacity: 1}
	raise := policyChange(bucket.DefaultTierName, m(10), m(20), 10, "1")
	lower := policyChange(bucket.DefaultTierName, m(10), m(20), 2, "1")
	stop := policyChange(bucket.DefaultTierName, m(100), m(200), 5, "0")
	unacked := raise
	unacked.Acked = false
	lim := func(l int64) func(*history.Op) { return limit(l) }
	runCases(t, Linearizable, []checkCase{
		{name: "worked example", h: hist(workedExample...), valid: true},
		{name: "concurrent ops linearized by stamp", valid: true, h: hist(
			allowed(0, m(10), m(5), 3),
			allowed(m(1), m(9), m(2), 4),
		)},
		{name: "peek takes nothing", valid: true, h: hist(
			with(allowed(0, m(1), 0, 5), cost(0)),
			allowed(m(2), m(3), m(2), 4),
		)},
		{name: "over-admission after a failover: the new leader starts from a full bucket", failure: "not linearizable",
			h: hist(append(burst(0, 5, "n1"), burst(20*msec, 5, "n2")...)...)},
		{name: "stale balance: a decision as if an earlier admission never happened", failure: "cannot then place",
			h: hist(allowed(0, m(1), m(0.5), 4), allowed(m(5), m(6), m(5.5), 4))},
		{name: "read sees the admission", valid: true,
			h: hist(allowed(0, m(1), m(0.5), 4), read(m(5), m(6), m(5.5), 4))},
		{name: "stale read", h: hist(allowed(0, m(1), m(0.5), 4), read(m(5), m(6), m(5.5), 5))},
		{name: "stamp going back", h: hist(allowed(0, m(1), m(10), 4), allowed(m(2), m(3), m(1), 3))},
		{name: "wrong limit", h: hist(with(allowed(0, m(1), 0, 4), lim(6)))},
		{name: "info op that must have been admitted", p: withPolicy(twoTokens), valid: true, h: hist(
			unknown(0, m(1)),
			with(allowed(m(2), m(3), m(2), 0), lim(2)),
		)},
		{name: "same without the info op", p: withPolicy(twoTokens), h: hist(
			with(allowed(m(2), m(3), m(2), 0), lim(2)),
		)},
		{name: "info op that must not have been admitted", p: withPolicy(twoTokens), valid: true, h: hist(
			unknown(0, m(1)),
			with(allowed(m(2), m(3), m(2), 1), lim(2)),
			with(allowed(m(4), m(5), m(4), 0), lim(2)),
		)},
		{name: "over-admission even counting the info op as admitted", p: withPolicy(oneToken), h: hist(
			unknown(0, m(1)),
			with(allowed(m(2), m(3), m(2), 0), lim(1)),
			with(allowed(m(4), m(5), m(4), 0), lim(1)),
		)},
		{name: "info op applied after the harness gave up", p: withPolicy(twoTokens), valid: true, h: hist(
			unknown(0, m(1)),
			with(allowed(m(2), m(3), m(2), 1), lim(2)),
			with(allowed(m(50), m(51), m(50), 0), lim(2)),
			with(denied(m(60), m(61), m(60), 0), lim(2)),
		)},
		{name: "duplicate answer is not a new decision", valid: true, h: hist(
			with(allowed(0, m(1), m(0.5), 4), reqID("r1")),
			with(allowed(m(10), m(11), m(0.5), 4), reqID("r1"), duplicate()),
			allowed(m(20), m(21), m(20), 3),
		)},
		{name: "info op resolved by a duplicate answer", valid: true, h: hist(
			with(unknown(0, m(100)), reqID("r1")),
			with(allowed(m(200), m(201), m(50), 4), reqID("r1"), duplicate()),
			allowed(m(300), m(301), m(300), 3),
		)},
		{name: "decision ignoring an info op a duplicate resolved", h: hist(
			with(unknown(0, m(100)), reqID("r1")),
			with(allowed(m(200), m(201), m(50), 4), reqID("r1"), duplicate()),
			allowed(m(300), m(301), m(300), 4),
		)},
		{name: "raised capacity adds no tokens", valid: true, h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			with(allowed(m(30), m(31), m(30), 3), lim(10)),
		), raise)},
		{name: "raised capacity filled the bucket", h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			with(allowed(m(30), m(31), m(30), 8), lim(10)),
		), raise)},
		{name: "lost policy change: old limit after the ack", failure: "not linearizable", h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			allowed(m(30), m(31), m(30), 3),
		), raise)},
		{name: "lowered capacity clamps", valid: true, h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			with(allowed(m(30), m(31), m(30), 1), lim(2)),
		), lower)},
		{name: "lowered capacity not clamped", h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			with(allowed(m(30), m(31), m(30), 3), lim(2)),
		), lower)},
		{name: "new rate applies since the last decision", valid: true, h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			allowed(m(1000), m(1001), m(1000), 3),
		), stop)},
		{name: "old rate used after the change", h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			allowed(m(1000), m(1001), m(1000), 4),
		), stop)},
		{name: "unacked change not applied", valid: true, h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			allowed(m(30), m(31), m(30), 3),
		), unacked)},
		{name: "unacked change applied", valid: true, h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			with(allowed(m(30), m(31), m(30), 3), lim(10)),
		), unacked)},
		{name: "full bucket forgotten, then raised: starts full at the new capacity", valid: true, h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			with(allowed(m(2000), m(2001), m(2000), 9), lim(10)),
		), policyChange(bucket.DefaultTierName, m(1500), m(1600), 10, "1"))},
		{name: "full bucket not forgotten, then raised: refills at the new policy", valid: true, h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			with(allowed(m(2000), m(2001), m(2000), 5), lim(10)),
		), policyChange(bucket.DefaultTierName, m(1500), m(1600), 10, "1"))},
		{name: "raised bucket neither forgotten nor refilled", h: withChanges(hist(
			allowed(0, m(1), 0, 4),
			with(allowed(m(2000), m(2001), m(2000), 7), lim(10)),
		), policyChange(bucket.DefaultTierName, m(1500), m(1600), 10, "1"))},
	})
}

func TestLinearizableVisualization(t *testing.T) {
	h := hist(append(burst(0, 5, "n1"), burst(20*msec, 5, "n2")...)...)
	res := Linearizable(h, params())
	require.False(t, res.Valid)
	require.NotNil(t, res.Visualization)
	assert.Equal(t, []string{"a"}, res.Visualization.Keys())
	res.Visualization.Annotate([]history.Interval{{Name: "partition-leader", Start: 0, Stop: int64(10 * msec), Detail: map[string]string{"cut": "n1|n2"}}})
	paths, err := res.Visualization.WriteHTML(filepath.Join(t.TempDir(), "vis"))
	require.NoError(t, err)
	require.Len(t, paths, 1)
	b, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	assert.Contains(t, string(b), "<html")
	assert.Contains(t, string(b), "partition-leader", "nemesis intervals are annotated")

	ok := Linearizable(hist(burst(0, 5, "n1")...), params())
	assert.True(t, ok.Valid)
	assert.Nil(t, ok.Visualization)
}

func TestLinearizableTimeoutIsNotValid(t *testing.T) {
	p := params()
	p.Timeout = time.Nanosecond
	var ops []history.Op
	for i := range 200 {
		d := time.Duration(i) * msec
		ops = append(ops, with(allowed(d, d+50*msec, d, 0), key("k"+string(rune('a'+i%20)))))
	}
	time.Sleep(time.Millisecond) // let the nanosecond budget pass
	res := Linearizable(hist(ops...), p)
	assert.False(t, res.Valid)
	assert.Positive(t, res.Summary["undecided_keys"])
}

func TestLinearizableBadParams(t *testing.T) {
	res := Linearizable(hist(burst(0, 1, "n1")...), Params{})
	assert.False(t, res.Valid)
	assert.Contains(t, res.Failures[0], "default policy")
}
