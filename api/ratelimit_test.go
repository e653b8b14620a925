package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quorate/quorate/api"
)

// header builds an http.Header through Set, from alternating names and
// values, so the expected keys are canonical whatever SetHeaders assigns.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// rateLimitCases are answers with the headers SetHeaders must give them:
// allowed, denied, a bucket that never refills, a rate not known, rates
// that round, tier names that need escapes or cannot be a structured
// string.
var rateLimitCases = []struct {
	name string
	r    api.AllowResponse
	want http.Header
}{
	{"allowed", api.AllowResponse{Allowed: true, Remaining: 4, Limit: 5, ResetAfterMs: 1500, Tier: "free", RefillPerSecond: "1"},
		header("RateLimit-Limit", "5", "RateLimit-Remaining", "4", "RateLimit-Reset", "2",
			"RateLimit-Policy", `"free";q=5;w=5`, "RateLimit", `"free";r=4;t=2`)},
	{"denied", api.AllowResponse{Remaining: 0, Limit: 10, RetryAfterMs: 250, ResetAfterMs: 20_000, Tier: "default", RefillPerSecond: "0.5"},
		header("RateLimit-Limit", "10", "RateLimit-Remaining", "0", "RateLimit-Reset", "20", "Retry-After", "1",
			"RateLimit-Policy", `"default";q=10;w=20`, "RateLimit", `"default";r=0;t=20`)},
	{"full, window rounded up", api.AllowResponse{Allowed: true, Remaining: 10, Limit: 10, Tier: "pro", RefillPerSecond: "3"},
		header("RateLimit-Limit", "10", "RateLimit-Remaining", "10", "RateLimit-Reset", "0",
			"RateLimit-Policy", `"pro";q=10;w=4`, "RateLimit", `"pro";r=10;t=0`)},
	{"never refills", api.AllowResponse{Remaining: 0, Limit: 3, RetryAfterMs: -1, ResetAfterMs: -1, Tier: "once", RefillPerSecond: "0"},
		header("RateLimit-Limit", "3", "RateLimit-Remaining", "0",
			"RateLimit-Policy", `"once";q=3`, "RateLimit", `"once";r=0`)},
	{"allowed, never refills", api.AllowResponse{Allowed: true, Remaining: 2, Limit: 3, ResetAfterMs: -1, Tier: "once", RefillPerSecond: "0"},
		header("RateLimit-Limit", "3", "RateLimit-Remaining", "2",
			"RateLimit-Policy", `"once";q=3`, "RateLimit", `"once";r=2`)},
	{"cost above capacity", api.AllowResponse{Remaining: 5, Limit: 5, RetryAfterMs: -1, ResetAfterMs: 0, Tier: "free", RefillPerSecond: "1"},
		header("RateLimit-Limit", "5", "RateLimit-Remaining", "5", "RateLimit-Reset", "0",
			"RateLimit-Policy", `"free";q=5;w=5`, "RateLimit", `"free";r=5;t=0`)},
	{"rate not known", api.AllowResponse{Allowed: true, Remaining: 1, Limit: 2, ResetAfterMs: 999, Tier: "free"},
		header("RateLimit-Limit", "2", "RateLimit-Remaining", "1", "RateLimit-Reset", "1",
			"RateLimit-Policy", `"free";q=2`, "RateLimit", `"free";r=1;t=1`)},
	{"a window beyond a structured integer", api.AllowResponse{Allowed: true, Remaining: 1, Limit: 1_000_000_000, ResetAfterMs: 1, Tier: "slow", RefillPerSecond: "0.000000001"},
		header("RateLimit-Limit", "1000000000", "RateLimit-Remaining", "1", "RateLimit-Reset", "1",
			"RateLimit-Policy", `"slow";q=1000000000;w=999999999999999`, "RateLimit", `"slow";r=1;t=1`)},
	{"tier with escapes", api.AllowResponse{Allowed: true, Remaining: 1, Limit: 2, ResetAfterMs: 1000, Tier: `q"b\s`, RefillPerSecond: "2"},
		header("RateLimit-Limit", "2", "RateLimit-Remaining", "1", "RateLimit-Reset", "1",
			"RateLimit-Policy", `"q\"b\\s";q=2;w=1`, "RateLimit", `"q\"b\\s";r=1;t=1`)},
	{"tier that is no structured string", api.AllowResponse{Remaining: 0, Limit: 2, RetryAfterMs: 1, ResetAfterMs: 1000, Tier: "é", RefillPerSecond: "2"},
		header("RateLimit-Limit", "2", "RateLimit-Remaining", "0", "RateLimit-Reset", "1", "Retry-After", "1")},
	{"empty tier", api.AllowResponse{Allowed: true, Remaining: 1, Limit: 1, ResetAfterMs: 0},
		header("RateLimit-Limit", "1", "RateLimit-Remaining", "1", "RateLimit-Reset", "0",
			"RateLimit-Policy", `"";q=1`, "RateLimit", `"";r=1;t=0`)},
}

func TestSetHeaders(t *testing.T) {
	for _, c := range rateLimitCases {
		h := http.Header{}
		c.r.SetHeaders(h)
		assert.Equal(t, c.want, h, c.name)
	}
}

// SetHeaders replaces what an earlier answer set in the same header, and
// leaves other fields alone.
func TestSetHeadersReplacesAnEarlierAnswers(t *testing.T) {
	h := http.Header{}
	rateLimitCases[1].r.SetHeaders(h) // denied: every field
	h.Set("Content-Type", "application/json")
	last := rateLimitCases[len(rateLimitCases)-2]
	last.r.SetHeaders(h)
	want := last.want.Clone()
	want.Set("Content-Type", "application/json")
	assert.Equal(t, want, h)
}

// The decision path calls SetHeaders on every answer: one string and one
// slice, whatever the fields.
func TestSetHeadersAllocatesTwice(t *testing.T) {
	h := http.Header{}
	for _, c := range rateLimitCases {
		n := testing.AllocsPerRun(20, func() {
			clear(h)
			c.r.SetHeaders(h)
		})
		assert.LessOrEqual(t, n, 2.0, c.name)
	}
}

// AppendFields gives what SetHeaders sets, named as the draft spells the
// fields and in SetHeaders' order, with one allocation (the values'
// string) into a slice that has room.
func TestAppendFieldsGivesWhatSetHeadersSets(t *testing.T) {
	order := []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After", "RateLimit-Policy", "RateLimit"}
	for _, c := range rateLimitCases {
		fields := c.r.AppendFields(nil)
		got := http.Header{}
		var names []string
		for _, f := range fields {
			got.Add(f.Name, f.Value)
			names = append(names, f.Name)
		}
		assert.Equal(t, c.want, got, c.name)
		var want []string
		for _, name := range order {
			if c.want.Get(name) != "" {
				want = append(want, name)
			}
		}
		assert.Equal(t, want, names, c.name)

		var buf [6]api.Field
		n := testing.AllocsPerRun(20, func() { _ = c.r.AppendFields(buf[:0]) })
		assert.LessOrEqual(t, n, 1.0, c.name)
	}
}
