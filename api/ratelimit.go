package api

import (
	"net/http"
	"strconv"

	"github.com/quorate/quorate/bucket"
)

// The rate-limit fields of an answer, by index into rateLimitNames and
// rateLimitKeys, in the order AppendFields gives them.
const (
	fieldLimit = iota
	fieldRemaining
	fieldReset
	fieldRetryAfter
	fieldPolicy
	fieldRateLimit
	numFields
)

// rateLimitNames are the fields' names as the draft and RFC 9110 spell
// them; rateLimitKeys the same in net/http's canonical form (a test checks
// them), so that SetHeaders assigns them without canonicalizing them on
// every answer.
var (
	rateLimitNames = [numFields]string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After", "RateLimit-Policy", "RateLimit"}
	rateLimitKeys  = [numFields]string{"Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset", "Retry-After", "Ratelimit-Policy", "Ratelimit"}
)

// maxSFInteger is the largest integer a structured field may carry (RFC
// 9651, section 3.3.1); a larger number of seconds is written as this.
const maxSFInteger = 999_999_999_999_999

// SetHeaders sets in h the rate-limit fields of the answer to one
// decision, and removes those that do not apply to it. The server writes
// them on every answer of POST /v1/allow; a middleware that answers a
// denial itself writes the same ones. Durations are whole seconds rounded
// up, computed from the answer's fields:
//
//	RateLimit-Limit:     Limit
//	RateLimit-Remaining: Remaining
//	RateLimit-Reset:     ResetAfterMs, until the bucket is full; absent if it never refills
//	Retry-After:         on a denial, RetryAfterMs; absent if allowed, or if it never will be
//	RateLimit-Policy:    "<Tier>";q=<Limit>;w=<seconds to refill from empty>
//	RateLimit:           "<Tier>";r=<Remaining>;t=<seconds until full>
//
// The last two are the structured fields of
// draft-ietf-httpapi-ratelimit-headers-11, the tier a quoted string with "
// and \ escaped. w is a sliding window's WindowSeconds; for a token
// bucket it is left out when RefillPerSecond is 0 or empty (not known), t
// when the bucket never refills. A tier with a byte outside printable
// ASCII (which the server's tier names never have) cannot be a
// structured-field string, and the answer then carries neither field.
//
// The values share one string and one slice: net/http and the standard
// middleware never write into a header's slice, only read or replace it.
func (r *AllowResponse) SetHeaders(h http.Header) {
	vals, present := r.fields()
	shared := vals[:]
	for i, key := range rateLimitKeys {
		if present[i] {
			h[key] = shared[i : i+1 : i+1]
		} else {
			delete(h, key)
		}
	}
}

// Field is one header field: a name as the draft spells it, and a value.
type Field struct {
	Name, Value string
}

// AppendFields appends to dst the fields SetHeaders sets, in the order of
// SetHeaders' list, for a protocol that carries them outside net/http
// (the Envoy service's response_headers_to_add). The values share one
// string.
func (r *AllowResponse) AppendFields(dst []Field) []Field {
	vals, present := r.fields()
	for i, name := range rateLimitNames {
		if present[i] {
			dst = append(dst, Field{Name: name, Value: vals[i]})
		}
	}
	return dst
}

// fields is every field's value (cut from one string) and whether the
// answer carries it.
func (r *AllowResponse) fields() (vals [numFields]string, present [numFields]bool) {
	reset := r.ResetAfterMs >= 0
	retry := !r.Allowed && r.RetryAfterMs >= 0
	window, windowOK := r.refillSeconds()

	var buf [256]byte
	var ends [numFields]int // where each value ends in b
	b := strconv.AppendInt(buf[:0], r.Limit, 10)
	ends[fieldLimit] = len(b)
	b = strconv.AppendInt(b, r.Remaining, 10)
	ends[fieldRemaining] = len(b)
	if reset {
		b = strconv.AppendInt(b, ceilSeconds(r.ResetAfterMs), 10)
	}
	ends[fieldReset] = len(b)
	if retry {
		b = strconv.AppendInt(b, ceilSeconds(r.RetryAfterMs), 10)
	}
	ends[fieldRetryAfter] = len(b)
	start := len(b)
	b, structured := appendSFString(b, r.Tier)
	if structured {
		tier := b[start:]
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, r.Limit, 10)
		if windowOK {
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, window, 10)
		}
		ends[fieldPolicy] = len(b)
		b = append(b, tier...)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, r.Remaining, 10)
		if reset {
			b = append(b, ";t="...)
			b = strconv.AppendInt(b, min(ceilSeconds(r.ResetAfterMs), maxSFInteger), 10)
		}
	} else {
		b = b[:start]
		ends[fieldPolicy] = len(b)
	}
	ends[fieldRateLimit] = len(b)

	all := string(b)
	from := 0
	for i, end := range ends {
		vals[i] = all[from:end]
		from = end
	}
	present = [numFields]bool{true, true, reset, retry, structured, structured}
	return vals, present
}

// refillSeconds is the draft's w: a sliding window's WindowSeconds, or how
// long a token bucket takes to refill from empty, in whole seconds rounded
// up: Limit tokens at RefillPerSecond. It reports false when the rate is 0
// or not known (or not a rate, or the limit not a capacity).
func (r *AllowResponse) refillSeconds() (int64, bool) {
	if r.WindowSeconds > 0 {
		return min(r.WindowSeconds, maxSFInteger), true
	}
	if r.RefillPerSecond == "" || r.Limit < 0 || r.Limit > bucket.MaxCapacity {
		return 0, false
	}
	rate, err := bucket.ParseRate(string(r.RefillPerSecond))
	if err != nil || rate == 0 {
		return 0, false
	}
	nano := r.Limit * bucket.Scale // at most 1e18
	s := nano / rate
	if nano%rate != 0 {
		s++
	}
	return min(s, maxSFInteger), true
}

// ceilSeconds is ms in whole seconds, rounded up (ms >= 0).
func ceilSeconds(ms int64) int64 {
	s := ms / 1000
	if ms%1000 != 0 {
		s++
	}
	return s
}

// appendSFString appends s as a structured-field string ("..." with " and
// \ escaped), or reports false, appending nothing, if s has a byte outside
// printable ASCII, which such a string cannot hold.
func appendSFString(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return b, false
		}
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"'), true
}
