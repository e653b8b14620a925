package fsm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/fsm"
)

// A group whose buckets are all gone still remembers the decisions that
// spent them, and the marks of the origins it forgets: Reclaimable keeps a
// leader proposing reclaims until all of it has gone, and no longer, so an
// idle group gives its memory back and then stays quiet.
func TestReclaimableUntilEverythingIsForgotten(t *testing.T) {
	f := newFSM(t, fsm.Options{Default: policy(10, 10*bucket.Scale)})
	assert.False(t, f.Reclaimable(at(time.Hour)), "a fresh group has nothing to forget")

	allowOne(t, f, at(0), fsm.AllowRequest{Client: "a", Cost: 1, Origin: fsm.MakeOrigin(3, 1)})
	allowOne(t, f, at(0), fsm.AllowRequest{Client: "b", Cost: 1, RequestID: "r1"})
	assert.True(t, f.Reclaimable(at(0)), "a bucket is held")

	res := apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(2 * time.Second)})
	require.Equal(t, 2, res.Buckets, "both buckets are full again")
	byID, byOrigin := f.Remembered()
	require.Equal(t, 1, byID)
	require.Equal(t, 1, byOrigin)
	assert.False(t, f.Reclaimable(at(2*time.Second)), "the decisions are remembered for their windows")
	assert.True(t, f.Reclaimable(at(11*time.Second)), "the origin's 10 s have passed")

	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(11 * time.Second)})
	_, byOrigin = f.Remembered()
	require.Zero(t, byOrigin, "forgotten by origin")
	assert.False(t, f.Reclaimable(at(11*time.Second)), "the request id has its 2 minutes, the mark its 5")
	assert.True(t, f.Reclaimable(at(2*time.Minute+1)), "the request id's window has passed")

	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(2*time.Minute + 1)})
	byID, _ = f.Remembered()
	require.Zero(t, byID, "forgotten by id")
	assert.False(t, f.Reclaimable(at(5*time.Minute)), "the origin's mark is kept 5 minutes after it rose")
	assert.True(t, f.Reclaimable(at(5*time.Minute+11*time.Second+1)), "then it goes")

	apply[*fsm.ReclaimResult](t, f, fsm.Reclaim{Stamp: at(5*time.Minute + 11*time.Second + 1)})
	assert.False(t, f.Reclaimable(at(1000*time.Hour)), "nothing is left to forget")
	assert.True(t, f.Reclaimable(0) == f.Reclaimable(at(5*time.Minute+11*time.Second+1)),
		"a stamp behind the group's time is read as the group's time")
}
