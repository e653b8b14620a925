package envoyrls

import (
	"math"
	"slices"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
)

// response is the gRPC answer of one answer per descriptor.
func response(out []api.AllowResponse) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(out))}
	tightest := 0
	for i, a := range out {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{
			Code:               rlsv3.RateLimitResponse_OK,
			CurrentLimit:       currentLimit(a),
			LimitRemaining:     uint32(min(max(a.Remaining, 0), math.MaxUint32)),
			DurationUntilReset: durationOf(a.ResetAfterMs),
		}
		if !a.Allowed {
			st.Code, resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if a.Degraded {
			st.DurationUntilReset = nil // a degraded answer knows nothing of the balance
		}
		resp.Statuses[i] = st
		if tighter(a, out[tightest]) {
			tightest = i
		}
	}
	if t := out[tightest]; !t.Degraded {
		resp.ResponseHeadersToAdd = headersOf(t)
	}
	return resp
}

// tighter reports whether a constrains its caller more than b: denied
// before allowed, then fewer tokens left.
func tighter(a, b api.AllowResponse) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	return a.Remaining < b.Remaining
}

// units are Envoy's units of time, longest first.
var units = []struct {
	seconds int64
	unit    rlsv3.RateLimitResponse_RateLimit_Unit
}{
	{86_400, rlsv3.RateLimitResponse_RateLimit_DAY},
	{3600, rlsv3.RateLimitResponse_RateLimit_HOUR},
	{60, rlsv3.RateLimitResponse_RateLimit_MINUTE},
	{1, rlsv3.RateLimitResponse_RateLimit_SECOND},
}

// currentLimit describes the policy that decided as Envoy's RateLimit,
// named after its tier: a sliding window of N per W seconds is N per W (in
// the longest unit that divides W, with W's multiple of it); a token bucket
// of capacity C that refills from empty in F whole seconds is C per F the
// same way, else, if some unit's refill is a whole number of tokens, that
// number per that unit (the sustained rate), else C with no unit; a bucket
// that never refills, or whose rate the answer does not know, is C with no
// unit (UNKNOWN).
func currentLimit(a api.AllowResponse) *rlsv3.RateLimitResponse_RateLimit {
	out := &rlsv3.RateLimitResponse_RateLimit{Name: a.Tier, RequestsPerUnit: uint32(min(max(a.Limit, 0), math.MaxUint32))}
	per := func(seconds int64) {
		for _, u := range units {
			if seconds%u.seconds == 0 {
				out.Unit = u.unit
				if m := seconds / u.seconds; m != 1 {
					out.UnitMultiplier = wrapperspb.UInt32(uint32(min(m, math.MaxUint32)))
				}
				return
			}
		}
	}
	if a.WindowSeconds > 0 {
		per(a.WindowSeconds)
		return out
	}
	rate, err := bucket.ParseRate(a.RefillPerSecond.String())
	if a.RefillPerSecond == "" || err != nil || rate <= 0 {
		return out
	}
	if fill := a.Limit * bucket.Scale; fill%rate == 0 { // a.Limit <= MaxCapacity: no overflow
		per(fill / rate)
		return out
	}
	for _, u := range slices.Backward(units) {
		if r := rate * u.seconds; r/u.seconds == rate && r%bucket.Scale == 0 && r/bucket.Scale <= math.MaxUint32 {
			out.RequestsPerUnit, out.Unit = uint32(r/bucket.Scale), u.unit
			return out
		}
	}
	return out
}
