// Package raftnet carries the raft traffic of every group on a node to each
// peer over one connection, and coalesces what can wait: heartbeats.
//
// hashicorp/raft runs many groups only as many independent *raft.Raft
// instances, each with its own transport. With raft's NetworkTransport that
// means connections, RPCs and heartbeats per group per peer, so an idle
// cluster's cost grows with the number of groups. A [Net] is one per node;
// [Net.Transport] gives each group a [raft.Transport] whose calls to a peer
// all share the Net's one connection to that peer. Each group still sees
// exactly its own RPCs and responses: the group name travels in every frame.
//
// # Coalescing
//
// A request that carries no log entries (a heartbeat, or the empty
// AppendEntries raft sends every CommitTimeout) may wait for the peer's next
// tick ([Options.Tick], on multiples of the tick in wall-clock time): every
// such request queued by then, from any group, leaves in one write, and the
// peer answers them in one write. Raft's heartbeat loop waits for each answer
// before sleeping a tenth to a fifth of its heartbeat timeout, so with a
// tick of a fifth of it or more every group's heartbeat to a peer rides the
// same write, once per tick, and the idle cost per peer is one round trip
// per tick however many groups there are. The tick is then the interval at
// which followers hear from their leader: keep it well inside raft's
// LeaderLeaseTimeout and HeartbeatTimeout (quorate uses a third of the
// heartbeat timeout, and a lease equal to it). Everything else (entries, votes, TimeoutNow) is written
// at once, taking along whatever waits. [Transport.Hurry] makes a group's
// requests urgent for a while (before VerifyLeader, whose heartbeats a read
// waits for).
//
// # Streams
//
// The Net accepts and dials streams on one layer (a [raftmux.Layer], under
// the node's raft port and its mutual TLS). A stream opens with the magic
// "QRN", a version byte (1) and its type: 'M' for the multiplexed
// connection a node dials to each peer it calls, 'S' for one InstallSnapshot
// (its data streams after the request, so it gets a stream of its own and
// never holds up another group's heartbeat).
//
// On an 'M' stream the dialer sends request frames and the acceptor answers
// with response frames, in any order:
//
//	request:  u32 length of the rest | kind u8 | seq uvarint | group string |
//	          deadline varint (Unix ns, 0: none) | body
//	response: u32 length of the rest | seq uvarint | status u8 (0 ok, 1 error) |
//	          body (the encoded response, or the error's text)
//
// Kinds are AppendEntries, Heartbeat (an AppendEntries shaped like raft's
// heartbeat, answered on raft's fast path unless its term is newer than
// the local raft's: see [Transport.SetLocalTerm]), RequestVote, RequestPreVote,
// TimeoutNow, and Call: a request to a handler registered with [Net.Handle]
// (the group field names the method), which is how the cluster forwards
// decisions to a group's leader in its own binary encoding. Raft messages
// are written field by field (codec.go).
//
// # Failures
//
// A call fails when it is not answered within [Options.Timeout] (or its
// deadline), when the connection breaks, or when the peer cannot be dialled
// within [Options.DialTimeout]. A connection on which a call timed out
// without anything arriving since it was sent is closed, failing every call
// waiting on it; the next call dials again. Callers waiting on one peer
// share one dial.
package raftnet
