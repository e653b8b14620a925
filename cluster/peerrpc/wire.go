package peerrpc

import (
	"encoding/binary"
	"fmt"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/binenc"
)

// Forwarded decisions travel as a raftnet call (method "allow", on the
// connection that carries the groups' raft traffic) in a binary format of
// their own, written and read field by field: a Go field renamed on one
// node can never change what nodes say to each other, and a busy node
// spends no time on JSON. The first byte is the format's version; a node
// refuses a version it does not know (a raftnet.RemoteError, nothing
// decided).
//
//	request:  version, count, then per item: group, deadline (Unix ns, 0:
//	          none), count, then per request: client, cost, request id,
//	          origin, retry
//	response: version, count, then per item: 0 and its decisions, or 1 and
//	          an error code and message; a decision is a flags byte
//	          (allowed, duplicate, maybe duplicate, unresolved, rate
//	          follows), remaining, limit, retry after, reset after, tier,
//	          stamp, origin, and, if the flag says so, the policy's rate
//
// The rate came after v0.14.0, whose decoder ignores the flag bit but would
// not expect the bytes after it: a leader sends rates only once the
// cluster version says every member reads them (see AppendAllowResp). A
// decision without the flag does not know its rate (fsm.Decision.RateKnown).
const allowWireVersion = 1

// maxWireString bounds a string's length on the wire, far above every rule.
const maxWireString = 1 << 16

// Decision flags on the wire.
const (
	wireAllowed = 1 << iota
	wireDuplicate
	wireMaybeDuplicate
	wireUnresolved
	wireRate   // the decision's rate follows its origin
	wireShadow // cluster version 2: a decision of a policy in shadow mode
	wireWindow // cluster version 2: the window follows the rate (or the origin)
	wireShed   // cluster version 3: a request the group did not decide (fsm.Decision.Shed)
)

// AppendAllowReq appends req in the binary format to b.
func AppendAllowReq(b []byte, req AllowReq) []byte {
	b = append(b, allowWireVersion)
	b = binary.AppendUvarint(b, uint64(len(req.Items)))
	for _, it := range req.Items {
		b = binary.AppendUvarint(b, uint64(it.Group))
		b = binary.AppendVarint(b, it.Deadline)
		b = binary.AppendUvarint(b, uint64(len(it.Requests)))
		for _, r := range it.Requests {
			b = binenc.AppendString(b, r.Client)
			b = binary.AppendUvarint(b, uint64(r.Cost))
			b = binenc.AppendString(b, r.RequestID)
			b = binary.AppendUvarint(b, r.Origin)
			b = binenc.AppendBool(b, r.Retry)
		}
	}
	return b
}

// DecodeAllowReq reads a request; the requests are checked later, like a
// caller's (checkItem, fsm.Validate).
func DecodeAllowReq(data []byte) (AllowReq, error) {
	r := &binenc.Reader{B: data}
	if v := r.Byte(); r.Err == nil && v != allowWireVersion {
		return AllowReq{}, fmt.Errorf("forwarded decisions in format %d, this node reads %d", v, allowWireVersion)
	}
	var req AllowReq
	n := r.Count(3)
	req.Items = make([]AllowItem, 0, n)
	for range n {
		it := AllowItem{Group: int(min(r.Uvarint(), 1<<31)), Deadline: r.Varint()}
		m := r.Count(5)
		it.Requests = make([]fsm.AllowRequest, 0, m)
		for range m {
			// Lengths and costs are only bounded here; the rules are
			// checked per item, like a caller's (checkItem, fsm.Validate).
			q := fsm.AllowRequest{Client: r.Str(maxWireString)}
			q.Cost = int64(min(r.Uvarint(), bucket.MaxCost+1))
			q.RequestID = r.Str(maxWireString)
			q.Origin = r.Uvarint()
			q.Retry = r.Bool()
			it.Requests = append(it.Requests, q)
		}
		req.Items = append(req.Items, it)
	}
	return req, wireErr(r)
}

// AppendAllowResp appends resp in the binary format to b. With v2, each
// decision that knows its rate carries it, and a decision of a shadow
// policy or a sliding window says so; without, the bytes are exactly what
// v0.14.0 writes and reads, and no decision has a rate (nor can it be of a
// policy v0.14.0 does not know). v2 must be false until the cluster
// version is fsm.ClusterVersionOriginsAlways.
func AppendAllowResp(b []byte, resp AllowResp, v2 bool) []byte {
	b = append(b, allowWireVersion)
	b = binary.AppendUvarint(b, uint64(len(resp.Items)))
	for _, it := range resp.Items {
		if it.Error != nil {
			b = append(b, 1)
			b = binenc.AppendString(b, it.Error.Code)
			b = binenc.AppendString(b, it.Error.Message)
			continue
		}
		b = append(b, 0)
		b = binary.AppendUvarint(b, uint64(len(it.Decisions)))
		for _, d := range it.Decisions {
			rate, window := v2 && d.RateKnown, v2 && d.Window != 0
			f := decisionFlags(d)
			if rate {
				f |= wireRate
			}
			if window {
				f |= wireWindow
			}
			if v2 && d.Shadow {
				f |= wireShadow
			}
			b = append(b, f)
			b = binary.AppendVarint(b, d.Remaining)
			b = binary.AppendVarint(b, d.Limit)
			b = binary.AppendVarint(b, d.RetryAfter)
			b = binary.AppendVarint(b, d.ResetAfter)
			b = binenc.AppendString(b, d.Tier)
			b = binary.AppendVarint(b, d.Stamp)
			b = binary.AppendUvarint(b, d.Origin)
			if rate {
				b = binary.AppendVarint(b, d.Rate)
			}
			if window {
				b = binary.AppendVarint(b, d.Window)
			}
		}
	}
	return b
}

func decisionFlags(d fsm.Decision) byte {
	var f byte
	if d.Allowed {
		f |= wireAllowed
	}
	if d.Duplicate {
		f |= wireDuplicate
	}
	if d.MaybeDuplicate {
		f |= wireMaybeDuplicate
	}
	if d.Unresolved {
		f |= wireUnresolved
	}
	if d.Shed {
		f |= wireShed
	}
	return f
}

// DecodeAllowResp reads an answer, of either format.
func DecodeAllowResp(data []byte) (AllowResp, error) {
	r := &binenc.Reader{B: data}
	if v := r.Byte(); r.Err == nil && v != allowWireVersion {
		return AllowResp{}, fmt.Errorf("decisions in format %d, this node reads %d", v, allowWireVersion)
	}
	var resp AllowResp
	n := r.Count(2)
	resp.Items = make([]AllowResult, 0, n)
	for range n {
		var it AllowResult
		switch kind := r.Byte(); kind {
		case 0:
			m := r.Count(8)
			it.Decisions = make([]fsm.Decision, 0, m)
			for range m {
				var d fsm.Decision
				f := r.Byte()
				d.Allowed, d.Duplicate = f&wireAllowed != 0, f&wireDuplicate != 0
				d.MaybeDuplicate, d.Unresolved = f&wireMaybeDuplicate != 0, f&wireUnresolved != 0
				d.Remaining, d.Limit = r.Varint(), r.Varint()
				d.RetryAfter, d.ResetAfter = r.Varint(), r.Varint()
				d.Tier = r.Str(bucket.MaxTierNameLen + len(bucket.DefaultTierName))
				d.Stamp, d.Origin = r.Varint(), r.Uvarint()
				d.Shadow, d.Shed = f&wireShadow != 0, f&wireShed != 0
				if f&wireRate != 0 {
					d.Rate, d.RateKnown = r.Varint(), true
					if r.Err == nil && (d.Rate < 0 || d.Rate > bucket.MaxRate) {
						r.Fail("refill rate %d", d.Rate)
					}
				}
				if f&wireWindow != 0 {
					d.Window = r.Varint()
					if r.Err == nil && (d.Window < bucket.Second || d.Window > bucket.MaxWindowSeconds*bucket.Second) {
						r.Fail("window %d", d.Window)
					}
				}
				it.Decisions = append(it.Decisions, d)
			}
		case 1:
			it.Error = &Error{Code: r.Str(64), Message: r.Str(1 << 16)}
		default:
			r.Fail("answer kind %d", kind)
		}
		resp.Items = append(resp.Items, it)
	}
	return resp, wireErr(r)
}

// wireErr is the reader's error, or an error for bytes left over.
func wireErr(r *binenc.Reader) error {
	if err := r.End(); err != nil {
		return fmt.Errorf("forwarded decisions: %w", err)
	}
	return nil
}
