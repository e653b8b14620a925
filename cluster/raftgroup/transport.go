package raftgroup

import (
	"io"
	"sync"
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
//   - Every append a follower took is noted in appends (see followerAppends):
//     a heartbeat answered says the peer runs, not that its log keeps up.
type transport struct {
	hurryTransport
	hurryFor  time.Duration
	onContact func(raft.ServerAddress)
	appends   *followerAppends
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
	return &transport{hurryTransport: h, hurryFor: hurryFor, onContact: onContact, appends: newFollowerAppends(time.Now)}
}

// followerAppends keeps, per follower address, when it last took an
// AppendEntries that checked its log (not a heartbeat) and the last index
// that append vouched for: the follower's log matches the leader's up to
// there. It is what a leadership transfer needs to know of its target:
// hashicorp/raft's transfer refuses every proposal until the target holds
// the leader's whole log, and its handing of that wait to the target's
// replication goroutine blocks, for as long as that goroutine sleeps in
// its failure backoff (up to about 10 s), when a second transfer follows
// one that timed out (v1.8.0). A follower that answered an append just
// now has no backoff pending and is at most an append behind.
type followerAppends struct {
	now func() time.Time
	mu  sync.Mutex
	by  map[raft.ServerAddress]appendSeen
}

type appendSeen struct {
	at      time.Time
	matched uint64
}

func newFollowerAppends(now func() time.Time) *followerAppends {
	return &followerAppends{now: now, by: map[raft.ServerAddress]appendSeen{}}
}

// took notes a follower's answer to req.
func (f *followerAppends) took(addr raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if !resp.Success || resp.Term > req.Term || (req.PrevLogEntry == 0 && len(req.Entries) == 0) {
		return // refused, or a heartbeat: nothing learnt of its log
	}
	matched := req.PrevLogEntry
	if n := len(req.Entries); n > 0 {
		matched = req.Entries[n-1].Index
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.by[addr] = appendSeen{at: f.now(), matched: matched}
}

// seen returns when addr last took an append and up to which index.
func (f *followerAppends) seen(addr raft.ServerAddress) (time.Time, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.by[addr]
	return s.at, s.matched
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
	err := t.answered(target, t.hurryTransport.AppendEntries(id, target, args, resp))
	if err == nil {
		t.appends.took(target, args, resp)
	}
	return err
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
