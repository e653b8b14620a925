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
