// Package fsm is quorate's replicated state machine: the commands that go
// into a Raft log, their compact binary encoding, their deterministic
// application to a group's state, and snapshots of that state.
//
// Apply depends only on the bytes of the log entries and on the state built
// from earlier entries: it reads no clock, no random source and no
// raft.Log.AppendedAt, never iterates a map in a way that reaches a result or
// a snapshot, and keeps no floating-point state. Two FSMs that apply the same
// entries hold identical state and produce identical snapshot bytes, however
// the entries were batched.
package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/internal/binenc"
)

// EnvelopeVersion is the first byte of every encoded command. A node that
// reads another version refuses the entry rather than guessing.
const EnvelopeVersion byte = 1

// Limits on what commands carry. The HTTP layer enforces the same limits
// with precise messages; Validate enforces them before anything is proposed,
// and apply again, so that an invalid entry that was committed anyway is
// refused identically on every replica (see Rejected).
const (
	MaxClientLen    = 256
	MaxRequestIDLen = 128
	// MaxBatch is the most decisions one allow entry may carry.
	MaxBatch = 1 << 16
)

// Type identifies a command in the envelope.
type Type byte

// Command types. Values are part of the log format: never renumber.
const (
	TypeAllow         Type = 1 // a batch of decisions with the leader's stamp
	TypeConfigOp      Type = 2 // one change to the configuration (tier set/delete, default set)
	TypeInstallConfig Type = 3 // a whole configuration at a version, installed if newer
	TypeSetTier       Type = 4 // assign a client to a tier, or remove its assignment
	TypeReclaim       Type = 5 // forget buckets that are full at the stamp
	// TypeAllowOrigin is an allow batch whose requests also carry their
	// origin and retry flag (see AllowRequest). Allow encodes as it when any
	// request has an origin, and as TypeAllow otherwise.
	TypeAllowOrigin Type = 6
	// TypeConfigOpV2 is a ConfigOp as cluster version 2 writes it: with
	// its policy's algorithm, window, mode and when-unavailable, its fill,
	// and the leader's stamp and the actor for the audit trail.
	// TypeInstallConfigPolicies is an InstallConfig with the policies and
	// fills of cluster version 2. A ConfigOp or InstallConfig encodes as
	// them only when it uses any of that, so that what v0.14.0 can say is
	// still written as v0.14.0 reads it.
	TypeConfigOpV2            Type = 10
	TypeInstallConfigPolicies Type = 11
	// TypeSetTierV2 is a SetTier with the leader's stamp and the actor
	// (cluster version 2).
	TypeSetTierV2 Type = 12
)

func (t Type) String() string {
	switch t {
	case TypeAllow:
		return "allow"
	case TypeConfigOp:
		return "config-op"
	case TypeInstallConfig:
		return "install-config"
	case TypeSetTier:
		return "set-tier"
	case TypeReclaim:
		return "reclaim"
	case TypeAllowOrigin:
		return "allow-origin"
	case TypeSetClusterVersion:
		return "set-cluster-version"
	case TypeAllocateEpoch:
		return "allocate-epoch"
	case TypeResetClient:
		return "reset-client"
	case TypeConfigOpV2:
		return "config-op-v2"
	case TypeSetTierV2:
		return "set-tier-v2"
	case TypeInstallConfigPolicies:
		return "install-config-policies"
	}
	return fmt.Sprintf("type(%d)", byte(t))
}

// Command is one log entry's content. The concrete types are Allow,
// ConfigOp, InstallConfig, SetTier, Reclaim, SetClusterVersion,
// AllocateEpoch and ResetClient.
type Command interface {
	Type() Type
	appendPayload(b []byte) []byte
}

// AllowRequest is one decision inside an Allow batch.
type AllowRequest struct {
	Client string
	// Cost is the number of tokens to take, 0..bucket.MaxCost; 0 peeks.
	Cost int64
	// RequestID, if not empty, makes the decision idempotent within the
	// dedup window: a second request with the same client and request id
	// returns the first decision and takes nothing.
	RequestID string
	// Origin names this request among every request any node ever
	// proposed (see MakeOrigin); 0 means none. The node that proposes a
	// request gives it one, so that when it cannot tell whether the request
	// was applied it can ask by retrying: a request without a RequestID is
	// then remembered under its origin, for a shorter window.
	Origin uint64
	// Retry marks a proposal of a request proposed before under the same
	// Origin whose outcome its node did not learn. If the group cannot
	// tell whether the first was applied (it may have forgotten it), the
	// decision comes back Unresolved instead of being made again.
	Retry bool
}

// Origins are a 24-bit epoch, chosen at random by a node when it starts,
// and a 40-bit sequence number it increments for every request. A group
// remembers, per epoch, the highest sequence number it has forgotten, which
// is how it knows that a retried request it does not remember was never
// applied (see FSM).
const (
	originSeqBits = 40
	// MaxOriginSeq is the largest sequence number of an origin.
	MaxOriginSeq = 1<<originSeqBits - 1
)

// MakeOrigin returns the origin of sequence number seq (1..MaxOriginSeq) in
// epoch (24 bits).
func MakeOrigin(epoch uint32, seq uint64) uint64 {
	return uint64(epoch&(1<<24-1))<<originSeqBits | seq&MaxOriginSeq
}

func originEpoch(o uint64) uint32 { return uint32(o >> originSeqBits) }
func originSeq(o uint64) uint64   { return o & MaxOriginSeq }

// Allow is a batch of decisions made at the leader's time Stamp
// (nanoseconds since the Unix epoch).
type Allow struct {
	Stamp    int64
	Requests []AllowRequest
}

// ConfigOpKind says what a ConfigOp changes.
type ConfigOpKind byte

// Config operation kinds. Values are part of the log format.
const (
	OpSetTier    ConfigOpKind = 1
	OpDeleteTier ConfigOpKind = 2
	OpSetDefault ConfigOpKind = 3
)

// ConfigOp changes one thing in the configuration and bumps its version by
// one. Tier is empty for OpSetDefault; Policy and OnRaise are unused for
// OpDeleteTier. With bucket.Fill, a change that raises the capacity
// records a fill (see bucket.Config.Filled). A ConfigOp with a Stamp is
// recorded in the audit trail (see audit.go).
type ConfigOp struct {
	Kind    ConfigOpKind
	Tier    string
	Policy  bucket.Policy
	OnRaise bucket.OnRaise
	Audited
}

// Audited is who made a change and when, on the entries the audit trail
// records (ConfigOp, SetTier, ResetClient). The leader that proposes the
// entry stamps it with its time, nanoseconds since the Unix epoch; a zero
// Stamp records nothing (entries of cluster version 1). Actor is the API
// token's name, or Anonymous.
type Audited struct {
	Stamp int64
	Actor string
}

// audited reports whether a records anything.
func (a Audited) audited() bool { return a.Stamp != 0 || a.Actor != "" }

// InstallConfig replaces the configuration with Config if Config.Version is
// newer than the one in force; an older or equal version is a no-op. It is
// how a configuration decided elsewhere (the meta group) reaches a group.
type InstallConfig struct {
	Config bucket.Config
}

// SetTier assigns Client to Tier; an empty Tier removes the assignment.
// With a Stamp, the group records the assignment as the client's last
// (ClientRecord).
type SetTier struct {
	Client string
	Tier   string
	Audited
}

// Reclaim forgets every bucket that is full at the leader's time Stamp, and
// expired dedup entries. A forgotten full bucket is indistinguishable from a
// new one, so no decision changes while the policy stays the same.
type Reclaim struct {
	Stamp int64
}

// Type is TypeAllowOrigin when a request carries an origin.
func (a Allow) Type() Type {
	for _, r := range a.Requests {
		if r.Origin != 0 || r.Retry {
			return TypeAllowOrigin
		}
	}
	return TypeAllow
}

// Type is TypeConfigOpV2 when the op uses a policy or fill of cluster
// version 2, or is audited.
func (o ConfigOp) Type() Type {
	if o.NeedsPolicies() || o.audited() {
		return TypeConfigOpV2
	}
	return TypeConfigOp
}

// Type is TypeInstallConfigPolicies when the configuration holds a policy
// or fill of cluster version 2.
func (ic InstallConfig) Type() Type {
	if ic.Config.Extended() {
		return TypeInstallConfigPolicies
	}
	return TypeInstallConfig
}

// NeedsPolicies reports whether o uses a policy or a fill of
// ClusterVersionPolicies.
func (o ConfigOp) NeedsPolicies() bool {
	return o.Policy.Extended() || o.OnRaise != bucket.Keep
}

// Type is TypeSetTierV2 when s is audited.
func (s SetTier) Type() Type {
	if s.audited() {
		return TypeSetTierV2
	}
	return TypeSetTier
}
func (Reclaim) Type() Type { return TypeReclaim }

// ErrMalformed is returned (wrapped) by Decode for bytes that are not a
// valid command.
var ErrMalformed = errors.New("malformed command")

// ErrInvalidCommand is returned (wrapped) by Validate, and so by Decode, for
// a well-formed command whose content breaks the rules of its version.
var ErrInvalidCommand = fmt.Errorf("%w: invalid content", ErrMalformed)

// maxFieldLen bounds every string of an encoded command, whatever its
// rules: a structural limit that keeps a decoder from allocating without
// bound, far above every limit Validate applies.
const maxFieldLen = 1 << 16

// ErrUnknownCommand is returned (wrapped) by Decode for a well-formed
// envelope whose type this version does not know. Apply panics on it: a
// replica that skipped an entry it did not understand would diverge.
var ErrUnknownCommand = errors.New("unknown command type")

// Encode returns the binary form of c: the envelope version, the type, then
// the payload.
func Encode(c Command) []byte {
	return AppendCommand(make([]byte, 0, 64), c)
}

// AppendCommand appends the binary form of c to b.
func AppendCommand(b []byte, c Command) []byte {
	b = append(b, EnvelopeVersion, byte(c.Type()))
	return c.appendPayload(b)
}

func (a Allow) appendPayload(b []byte) []byte {
	origins := a.Type() == TypeAllowOrigin
	b = binary.AppendVarint(b, a.Stamp)
	b = binary.AppendUvarint(b, uint64(len(a.Requests)))
	for _, r := range a.Requests {
		b = binenc.AppendString(b, r.Client)
		b = binary.AppendUvarint(b, uint64(r.Cost))
		b = binenc.AppendString(b, r.RequestID)
		if origins {
			b = binary.AppendUvarint(b, r.Origin)
			b = binenc.AppendBool(b, r.Retry)
		}
	}
	return b
}

func (o ConfigOp) appendPayload(b []byte) []byte {
	b = append(b, byte(o.Kind))
	b = binenc.AppendString(b, o.Tier)
	if o.Type() == TypeConfigOp {
		return appendPolicy(b, o.Policy)
	}
	b = appendPolicyV2(b, o.Policy)
	b = append(b, byte(o.OnRaise))
	return o.Audited.append(b)
}

func (ic InstallConfig) appendPayload(b []byte) []byte {
	return appendConfig(b, ic.Config, ic.Type() == TypeInstallConfigPolicies)
}

func (s SetTier) appendPayload(b []byte) []byte {
	b = binenc.AppendString(b, s.Client)
	b = binenc.AppendString(b, s.Tier)
	if s.Type() == TypeSetTierV2 {
		b = s.Audited.append(b)
	}
	return b
}

func (a Audited) append(b []byte) []byte {
	b = binary.AppendVarint(b, a.Stamp)
	return binenc.AppendString(b, a.Actor)
}

func (r *reader) audited() Audited {
	return Audited{Stamp: r.Varint(), Actor: r.Str(maxFieldLen)}
}

func (r Reclaim) appendPayload(b []byte) []byte {
	return binary.AppendVarint(b, r.Stamp)
}

// decoders is the dispatch table for Decode, one entry per known type.
type decodeFunc func(r *reader) (Command, error)

func newDecoders() map[Type]decodeFunc {
	return map[Type]decodeFunc{
		TypeAllow:         decodeAllow(false),
		TypeAllowOrigin:   decodeAllow(true),
		TypeConfigOp:      decodeConfigOp(false),
		TypeInstallConfig: decodeInstallConfig(false),

		TypeConfigOpV2:            decodeConfigOp(true),
		TypeInstallConfigPolicies: decodeInstallConfig(true),
		TypeSetTier:               decodeSetTier(false),
		TypeSetTierV2:             decodeSetTier(true),
		TypeReclaim:               decodeReclaim,

		TypeSetClusterVersion: decodeSetClusterVersion,
		TypeAllocateEpoch:     decodeAllocateEpoch,
		TypeResetClient:       decodeResetClient,
	}
}

var decoders = newDecoders()

// Decode parses one command. It never panics: garbage yields an error
// wrapping ErrMalformed, an unknown type one wrapping ErrUnknownCommand.
// Trailing bytes after the payload are malformed.
func Decode(data []byte) (Command, error) {
	c, err := decodeStructure(data)
	if err != nil {
		return nil, err
	}
	if err := Validate(c); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeStructure decodes data without Validate's rules: an error means the
// bytes are not a command at all.
func decodeStructure(data []byte) (Command, error) {
	if len(data) < 2 {
		return nil, fmt.Errorf("%w: %d bytes, need at least 2", ErrMalformed, len(data))
	}
	if data[0] != EnvelopeVersion {
		return nil, fmt.Errorf("%w: envelope version %d, this node reads %d", ErrUnknownCommand, data[0], EnvelopeVersion)
	}
	t := Type(data[1])
	dec, ok := decoders[t]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownCommand, data[1])
	}
	r := &reader{binenc.Reader{B: data[2:]}}
	c, err := dec(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, t, err)
	}
	if len(r.B) != 0 {
		return nil, fmt.Errorf("%w: %s: %d trailing bytes", ErrMalformed, t, len(r.B))
	}
	return c, nil
}

// decodeAllow decodes TypeAllow, or TypeAllowOrigin when origins is set.
func decodeAllow(origins bool) decodeFunc {
	minSize := uint64(3) // client length, cost, request id length
	if origins {
		minSize += 2 // origin, flags
	}
	return func(r *reader) (Command, error) {
		a := Allow{Stamp: r.Varint()}
		n := r.Uvarint()
		// Bound n by the bytes left before allocating.
		if r.Err == nil && n > uint64(len(r.B))/minSize {
			return nil, fmt.Errorf("batch of %d requests in %d bytes", n, len(r.B))
		}
		a.Requests = make([]AllowRequest, 0, n)
		for i := uint64(0); i < n && r.Err == nil; i++ {
			var req AllowRequest
			req.Client = r.Str(maxFieldLen)
			cost := r.Uvarint()
			if cost > math.MaxInt64 {
				return nil, fmt.Errorf("cost %d does not fit an int64", cost)
			}
			req.Cost = int64(cost)
			req.RequestID = r.Str(maxFieldLen)
			if origins {
				req.Origin = r.Uvarint()
				switch flags := r.Byte(); flags {
				case 0, 1:
					req.Retry = flags == 1
				default:
					r.Fail("request flags %#x", flags)
				}
			}
			a.Requests = append(a.Requests, req)
		}
		return a, r.Err
	}
}

// decodeConfigOp decodes TypeConfigOp, or TypeConfigOpV2 when v2 is
// set.
func decodeConfigOp(v2 bool) decodeFunc {
	return func(r *reader) (Command, error) {
		o := ConfigOp{Kind: ConfigOpKind(r.Byte())}
		o.Tier = r.Str(maxFieldLen)
		if !v2 {
			o.Policy = r.policy()
		} else {
			o.Policy = r.policyV2()
			o.OnRaise = bucket.OnRaise(r.Byte())
			if r.Err == nil && o.OnRaise > bucket.Fill {
				r.Fail("on_raise %d", o.OnRaise)
			}
			o.Audited = r.audited()
		}
		if r.Err != nil {
			return nil, r.Err
		}
		return o, nil
	}
}

// decodeInstallConfig decodes TypeInstallConfig, or
// TypeInstallConfigPolicies when v2 is set.
func decodeInstallConfig(v2 bool) decodeFunc {
	return func(r *reader) (Command, error) {
		c := r.config(v2)
		return InstallConfig{Config: c}, r.Err
	}
}

// decodeSetTier decodes TypeSetTier, or TypeSetTierV2 when audited is set.
func decodeSetTier(audited bool) decodeFunc {
	return func(r *reader) (Command, error) {
		s := SetTier{Client: r.Str(maxFieldLen), Tier: r.Str(maxFieldLen)}
		if audited {
			s.Audited = r.audited()
		}
		return s, r.Err
	}
}

func decodeReclaim(r *reader) (Command, error) {
	return Reclaim{Stamp: r.Varint()}, r.Err
}

// appendPolicy writes a token bucket as v0.14.0 does: capacity and rate.
func appendPolicy(b []byte, p bucket.Policy) []byte {
	b = binary.AppendVarint(b, p.Capacity)
	return binary.AppendVarint(b, p.Rate)
}

// appendPolicyV2 writes any policy: the algorithm, capacity, rate, window,
// mode and when-unavailable.
func appendPolicyV2(b []byte, p bucket.Policy) []byte {
	b = append(b, byte(p.Algorithm))
	b = appendPolicy(b, p)
	b = binary.AppendVarint(b, p.Window)
	return append(b, byte(p.Mode), byte(p.WhenUnavailable))
}

// appendConfig writes a configuration with its tiers in sorted order, so the
// bytes depend only on the content; v2 writes policies with appendPolicyV2
// and the fills after the tiers, in sorted order too.
func appendConfig(b []byte, c bucket.Config, v2 bool) []byte {
	pol := appendPolicy
	if v2 {
		pol = appendPolicyV2
	}
	b = binary.AppendUvarint(b, c.Version)
	b = pol(b, c.Default)
	names := c.TierNames()
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = binenc.AppendString(b, n)
		b = pol(b, c.Tiers[n])
	}
	if v2 {
		filled := slices.Sorted(maps.Keys(c.Filled))
		b = binary.AppendUvarint(b, uint64(len(filled)))
		for _, n := range filled {
			b = binenc.AppendString(b, n)
			b = binary.AppendUvarint(b, c.Filled[n])
		}
	}
	return b
}

// reader decodes the log's encodings: binenc's primitives and the fsm's
// own composites (policies, configurations, decisions).
type reader struct{ binenc.Reader }

func (r *reader) policy() bucket.Policy {
	return bucket.Policy{Capacity: r.Varint(), Rate: r.Varint()}
}

func (r *reader) policyV2() bucket.Policy {
	a := bucket.Algorithm(r.Byte())
	p := r.policy()
	p.Algorithm = a
	p.Window = r.Varint()
	p.Mode, p.WhenUnavailable = bucket.Mode(r.Byte()), bucket.Unavailable(r.Byte())
	return p
}

// config reads what appendConfig writes.
func (r *reader) config(v2 bool) bucket.Config {
	pol := r.policy
	if v2 {
		pol = r.policyV2
	}
	c := bucket.Config{Version: r.Uvarint(), Default: pol()}
	n := r.Uvarint()
	if r.Err == nil && n > uint64(len(r.B))/3 {
		r.Fail("%d tiers in %d bytes", n, len(r.B))
	}
	c.Tiers = make(map[string]bucket.Policy, min(n, 1024))
	var prev string
	for i := uint64(0); i < n && r.Err == nil; i++ {
		name := r.Str(maxFieldLen)
		p := pol()
		if r.Err == nil && i > 0 && name <= prev {
			r.Fail("tiers not in strictly increasing order")
		}
		prev = name
		c.Tiers[name] = p
	}
	if !v2 {
		return c
	}
	n = r.Count(2)
	c.Filled = make(map[string]uint64, n)
	for i := uint64(0); i < n && r.Err == nil; i++ {
		name := r.Str(maxFieldLen)
		if r.Err == nil && i > 0 && name <= prev {
			r.Fail("fills not in strictly increasing order")
		}
		prev = name
		c.Filled[name] = r.Uvarint()
	}
	return c
}
