package raftgroup

import "time"

// Timings are the raft timeouts every group uses.
type Timings struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotInterval   time.Duration
	SnapshotThreshold  uint64
	// TrailingLogs is how many entries a snapshot leaves in the log, for
	// followers that are a little behind (raft's default, 10240, if zero).
	TrailingLogs uint64
}

// LoopbackTimings suit nodes on one machine (tests, a local cluster):
// elections in tens of milliseconds, no snapshots unless asked for.
var LoopbackTimings = Timings{
	HeartbeatTimeout:   50 * time.Millisecond,
	ElectionTimeout:    50 * time.Millisecond,
	LeaderLeaseTimeout: 50 * time.Millisecond,
	CommitTimeout:      5 * time.Millisecond,
	SnapshotInterval:   time.Hour,
	SnapshotThreshold:  1 << 20,
}

// DefaultTimings suit a LAN: a crashed leader is replaced in well under a
// second (the README's Failover section has the measured figures). With
// raftnet, every group's heartbeats to a peer share one write per 100 ms
// tick (a third of the heartbeat timeout), whatever the number of groups;
// the lease, equal to the heartbeat timeout, leaves room for three ticks.
var DefaultTimings = Timings{
	HeartbeatTimeout:   300 * time.Millisecond,
	ElectionTimeout:    300 * time.Millisecond,
	LeaderLeaseTimeout: 300 * time.Millisecond,
	CommitTimeout:      250 * time.Millisecond,
	SnapshotInterval:   30 * time.Second,
	SnapshotThreshold:  8192,
}
