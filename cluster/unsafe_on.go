//go:build unsafe_decide

package cluster

// unsafeLocalDecisions makes every node, leader or follower, decide allow
// requests on its own replica without going through raft: the negative
// control of the fault suite, which must catch it over-admitting. Never
// build a real binary with the unsafe_decide tag.
const unsafeLocalDecisions = true
