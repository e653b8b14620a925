package raftgroup

import (
	"io"
	"time"

	"github.com/hashicorp/raft"
)

// hurryTransport is what a group's raft transport offers beyond
// raft.Transport for the group to wrap it (transport/raftnet's Transport
// does): requests without entries may wait for a tick to share a write,
// unless hurried.
type hurryTransport interface {
	raft.Transport
	raft.WithClose
	raft.WithPreVote
	Hurry(d time.Duration)
}

// transport wraps a group's raft transport to do two things raft cannot ask
// of it:
//
//   - A candidate hurries its group's requests (Hurry) when it asks for
//     votes, for an election timeout, so that if it wins, its first
//     AppendEntries (raft sends one without entries at once to probe each
//     follower's log, and replicates nothing to that follower until it is
//     answered) does not wait for the transport's tick. Without it every
//     new leader, elected or handed leadership, served a tick later (a
//     third of the heartbeat timeout) than it could: its barrier commits
//     only after that probe.
//   - Every answered request reports its peer to onContact: the node's
//     evidence of which peers it can reach (see cluster's reach).
type transport struct {
	hurryTransport
	hurryFor  time.Duration
	onContact func(raft.ServerAddress)
}

// wrapTransport returns t wrapped, or t itself if it cannot be hurried.
func wrapTransport(t raft.Transport, hurryFor time.Duration, onContact func(raft.ServerAddress)) raft.Transport {
	h, ok := t.(hurryTransport)
	if !ok {
		return t
	}
	if onContact == nil {
		onContact = func(raft.ServerAddress) {}
	}
	return &transport{hurryTransport: h, hurryFor: hurryFor, onContact: onContact}
}

func (t *transport) answered(target raft.ServerAddress, err error) error {
	if err == nil {
		t.onContact(target)
	}
	return err
}

// InstallSnapshot implements raft.Transport.
func (t *transport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.answered(target, t.hurryTransport.InstallSnapshot(id, target, args, resp, data))
}

// AppendEntries implements raft.Transport.
func (t *transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.answered(target, t.hurryTransport.AppendEntries(id, target, args, resp))
}

// RequestVote implements raft.Transport.
func (t *transport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	t.Hurry(t.hurryFor)
	return t.answered(target, t.hurryTransport.RequestVote(id, target, args, resp))
}

// RequestPreVote implements raft.WithPreVote.
func (t *transport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.answered(target, t.hurryTransport.RequestPreVote(id, target, args, resp))
}

// TimeoutNow implements raft.Transport.
func (t *transport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.answered(target, t.hurryTransport.TimeoutNow(id, target, args, resp))
}
