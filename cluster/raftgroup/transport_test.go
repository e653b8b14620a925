package raftgroup

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTransport records what the wrapper asks of the transport it wraps.
type fakeTransport struct {
	hurryTransport // nil: only the methods below are called
	calls          []string
	fail           error
}

func (f *fakeTransport) Hurry(d time.Duration) { f.calls = append(f.calls, "hurry "+d.String()) }

func (f *fakeTransport) RequestVote(raft.ServerID, raft.ServerAddress, *raft.RequestVoteRequest, *raft.RequestVoteResponse) error {
	f.calls = append(f.calls, "vote")
	return f.fail
}

func (f *fakeTransport) AppendEntries(raft.ServerID, raft.ServerAddress, *raft.AppendEntriesRequest, *raft.AppendEntriesResponse) error {
	f.calls = append(f.calls, "append")
	return f.fail
}

// A candidate hurries its group's transport before it asks for votes, so
// that, if it wins, its first AppendEntries (raft's probe of each
// follower, without entries) leaves at once instead of at the next tick;
// and every answered request is evidence that its peer is reachable.
func TestTransportHurriesCandidatesAndReportsContact(t *testing.T) {
	inner := &fakeTransport{}
	var heard []raft.ServerAddress
	tr := wrapTransport(inner, 300*time.Millisecond, func(a raft.ServerAddress) { heard = append(heard, a) })
	require.NotSame(t, inner, tr)

	require.NoError(t, tr.RequestVote("n2", "b:1", &raft.RequestVoteRequest{}, &raft.RequestVoteResponse{}))
	require.NoError(t, tr.AppendEntries("n3", "c:1", &raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{}))
	assert.Equal(t, []string{"hurry 300ms", "vote", "append"}, inner.calls)
	assert.Equal(t, []raft.ServerAddress{"b:1", "c:1"}, heard)

	inner.fail = errors.New("unreachable")
	require.Error(t, tr.AppendEntries("n3", "c:1", &raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{}))
	assert.Len(t, heard, 2, "a request that failed is no evidence of contact")

	// A transport that cannot be hurried is used as it is.
	_, plain := raft.NewInmemTransport("")
	assert.Same(t, raft.Transport(plain), wrapTransport(plain, time.Second, nil))
}

// Only an append that checked a follower's log, and that it took, says how
// far its log matches: heartbeats, refusals and answers from a newer term
// say nothing of it.
func TestFollowerAppendsNoteOnlyAppendsTaken(t *testing.T) {
	now := time.Unix(100, 0)
	f := newFollowerAppends(func() time.Time { return now })
	entries := func(from, to uint64) []*raft.Log {
		var out []*raft.Log
		for i := from; i <= to; i++ {
			out = append(out, &raft.Log{Index: i, Term: 2})
		}
		return out
	}
	ok := &raft.AppendEntriesResponse{Term: 2, Success: true}

	f.took("a:1", &raft.AppendEntriesRequest{Term: 2}, ok) // a heartbeat
	at, _ := f.seen("a:1")
	assert.True(t, at.IsZero(), "a heartbeat answered is no append")

	f.took("a:1", &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 9, Entries: entries(10, 12)}, &raft.AppendEntriesResponse{Term: 2})
	at, _ = f.seen("a:1")
	assert.True(t, at.IsZero(), "a refused append matched nothing")

	f.took("a:1", &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 9, Entries: entries(10, 12)}, &raft.AppendEntriesResponse{Term: 3, Success: true})
	at, _ = f.seen("a:1")
	assert.True(t, at.IsZero(), "an answer from a newer term is not this leader's append")

	f.took("a:1", &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 9, Entries: entries(10, 12)}, ok)
	at, matched := f.seen("a:1")
	assert.Equal(t, now, at)
	assert.Equal(t, uint64(12), matched, "matched up to the append's last entry")

	now = now.Add(time.Second)
	f.took("a:1", &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 12}, ok) // raft's commit-timeout probe
	at, matched = f.seen("a:1")
	assert.Equal(t, now, at)
	assert.Equal(t, uint64(12), matched, "an append without entries matches its previous entry")

	at, _ = f.seen("b:1")
	assert.True(t, at.IsZero(), "followers are told apart")
}
