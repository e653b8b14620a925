package fsm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// A reset forgets the bucket and nothing else: the next decision finds it
// full, the tier assignment and the remembered request ids stay, and a
// second reset changes nothing more.
func TestResetClientForgetsTheBucketOnly(t *testing.T) {
	f := newFSM(t, fsm.Options{})
	apply[*fsm.ConfigResult](t, f, setTierOp("free", policy(5, 0)))
	apply[*fsm.SetTierResult](t, f, fsm.SetTier{Client: "alice", Tier: "free"})
	d := allowOne(t, f, at(0), fsm.AllowRequest{Client: "alice", Cost: 5, RequestID: "r1"})
	require.True(t, d.Allowed)
	require.False(t, allowOne(t, f, at(time.Second), fsm.AllowRequest{Client: "alice", Cost: 1}).Allowed, "drained, no refill")
	bytesBefore := f.StateBytes()

	assert.Equal(t, &fsm.ResetResult{Existed: true}, apply[*fsm.ResetResult](t, f, fsm.ResetClient{Client: "alice"}))
	assert.Less(t, f.StateBytes(), bytesBefore, "the bucket's bytes are given back")
	assert.Equal(t, &fsm.ResetResult{Existed: false}, apply[*fsm.ResetResult](t, f, fsm.ResetClient{Client: "alice"}), "a second reset finds nothing")

	d = allowOne(t, f, at(2*time.Second), fsm.AllowRequest{Client: "alice", Cost: 5})
	assert.True(t, d.Allowed, "full again")
	assert.Equal(t, "free", d.Tier, "the tier assignment stays")
	again := allowOne(t, f, at(3*time.Second), fsm.AllowRequest{Client: "alice", Cost: 5, RequestID: "r1"})
	assert.True(t, again.Duplicate, "a remembered request id is still answered from memory, spending nothing")
	assert.False(t, allowOne(t, f, at(4*time.Second), fsm.AllowRequest{Client: "alice", Cost: 1}).Allowed)
	assert.Equal(t, 1, f.Buckets())
}

// Every replica applies a reset the same way, and a reset the rules refuse
// is refused by every replica, changing nothing.
func TestResetClientIsValidated(t *testing.T) {
	for _, c := range []fsm.ResetClient{{}, {Client: strings.Repeat("x", fsm.MaxClientLen+1)}} {
		assert.ErrorIs(t, fsm.Validate(c), fsm.ErrInvalidCommand, "%q", c.Client)
	}
	a, b := newFSM(t, fsm.Options{}), newFSM(t, fsm.Options{})
	for _, f := range []*fsm.FSM{a, b} {
		allowOne(t, f, at(0), fsm.AllowRequest{Client: "bob", Cost: 3})
		apply[*fsm.ResetResult](t, f, fsm.ResetClient{Client: "bob"})
		allowOne(t, f, at(time.Second), fsm.AllowRequest{Client: "bob", Cost: 1})
	}
	assert.Equal(t, a.MarshalSnapshot(), b.MarshalSnapshot())
	v := a.View("bob", at(time.Second))
	assert.Equal(t, (bucket.BuiltinDefault.Capacity-1)*bucket.Scale, v.Decision.Remaining, "one token spent since the reset")
}
