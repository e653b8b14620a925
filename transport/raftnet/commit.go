package raftnet

import "github.com/hashicorp/raft"

// capCommit lowers an AppendEntries request's commit index to the last entry
// the request itself vouches for: its previous entry plus the entries it
// carries. That is the Raft paper's rule for a follower (Figure 2: "set
// commitIndex = min(leaderCommit, index of last new entry)"). It reports
// whether the request asked for more.
//
// hashicorp/raft v1.8.0's follower takes min(leaderCommit, its own last
// index) instead. The two differ when the follower holds entries past the
// ones a request checked, and those entries can be a deposed leader's
// uncommitted tail: a leader paused past the election timeout appends
// proposals when it resumes, before it hears of the newer term. If the new
// leader's first request to it after that carries a commit index beyond its
// own entries (raft reads the commit index after the entries are chosen,
// and after a failure's backoff), the follower commits and applies the
// stale tail; the next request deletes those entries from the log, but the
// state machine has already applied them. Capping here, on the receiving
// side, keeps raft's follower to the paper's rule whatever the sender
// built. A leader's later requests (raft sends one every CommitTimeout
// with its last entry as the previous one) carry the commit index on.
//
// Most capped requests are harmless: a follower catching up gets batches
// of at most MaxAppendEntries entries, each carrying the leader's commit
// index far past the batch (a crash-mix fault run capped about 260), and
// it now learns the commit one batch at a time.
func capCommit(ae *raft.AppendEntriesRequest) bool {
	vouched := ae.PrevLogEntry + uint64(len(ae.Entries))
	if n := len(ae.Entries); n > 0 {
		vouched = ae.Entries[n-1].Index
	}
	if ae.LeaderCommitIndex <= vouched {
		return false
	}
	ae.LeaderCommitIndex = vouched
	return true
}
