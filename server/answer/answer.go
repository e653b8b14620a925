// Package answer is what a node answers for a decision, in api types, for
// every protocol it serves: a decision the cluster made (Of), and one it
// could not make in time (Degrade, README "Semantics", when_unavailable).
// The HTTP API and the Envoy rate-limit service answer through it alike.
package answer

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// Of is d as the API answers it, with rate strings from rates.
func Of(d fsm.Decision, rates *Rates) api.AllowResponse {
	out := api.AllowResponse{
		Allowed:       d.Allowed,
		Remaining:     d.RemainingTokens(),
		Limit:         d.Limit,
		RetryAfterMs:  CeilDiv(d.RetryAfter, int64(time.Millisecond)),
		ResetAfterMs:  CeilDiv(d.ResetAfter, int64(time.Millisecond)),
		Tier:          d.Tier,
		StampUnixNano: d.Stamp,
		Duplicate:     d.Duplicate,

		MaybeDuplicate: d.MaybeDuplicate,
		WindowSeconds:  d.Window / bucket.Second,
	}
	if d.RateKnown && d.Window == 0 {
		out.RefillPerSecond = rates.Get(d.Rate)
	}
	if d.Shadow {
		out.SetShadow(d.Allowed)
	}
	return out
}

// CeilDiv returns ns/unit rounded up, for ns >= 0, and maps bucket.Never
// (-1) to -1. It does not overflow for any int64.
func CeilDiv(ns, unit int64) int64 {
	if ns == bucket.Never {
		return bucket.Never
	}
	q := ns / unit
	if ns%unit != 0 {
		q++
	}
	return q
}

// Rates remembers the decimal form of the refill rates answered
// (bucket.FormatRate), so that writing one allocates nothing after the
// first time: a cluster has a handful of policies. It is a fixed table of
// slots, each holding the last rate that hashed to it, safe for concurrent
// use; the zero value is empty.
type Rates struct {
	slots [64]atomic.Pointer[rateString]
}

type rateString struct {
	rate int64
	s    json.Number
}

// Get returns rate as a decimal number of tokens per second.
func (c *Rates) Get(rate int64) json.Number {
	slot := &c.slots[(uint64(rate)*0x9e3779b97f4a7c15)>>58] // Fibonacci hashing: the top 6 bits
	if e := slot.Load(); e != nil && e.rate == rate {
		return e.s
	}
	e := &rateString{rate: rate, s: json.Number(bucket.FormatRate(rate))}
	slot.Store(e)
	return e.s
}
