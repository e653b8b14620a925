package fsm

import (
	"encoding/binary"
	"fmt"
)

// Cluster versions: what every replica of a group agrees the cluster may
// write and how its entries apply. A group starts at BaseClusterVersion, the
// formats and rules of the release before versions existed, and moves up
// only by a SetClusterVersion entry in its own log, which the cluster
// proposes once every member's binary supports the new version. Rules that
// change how an entry applies are tied to the version in force at the
// entry's position, so replicas of old and new binaries apply every entry
// alike until the version moves.
const (
	// BaseClusterVersion is the cluster version of a group that has never
	// applied a SetClusterVersion: every format and rule of the release
	// without versions (commit 67142fb), which new binaries still write
	// while it is in force.
	BaseClusterVersion uint32 = 1
	// ClusterVersionOriginsAlways: every attempt of a request that carries
	// an origin, not only a retry, is looked up in the origin memory, and
	// a first attempt the group may have forgotten is Unresolved. A retry
	// that overtook its original (the original's frame stalled in a dead
	// connection) otherwise left the late original to be decided again:
	// spent twice. Snapshots carry the cluster version (format 3), and
	// remembered decisions keep their policy's rate (Decision.Rate), which
	// format 3 holds and format 2 cannot. Leaders send forwarded decisions
	// with their rates (cluster/peerrpc), which v0.14.0 cannot read.
	ClusterVersionOriginsAlways uint32 = 2
	// ClusterVersionPolicies is the same version, for what else it brings
	// (one release introduced both): policies beyond v0.14.0's token bucket
	// (sliding windows, shadow mode, when_unavailable) and fill on raise,
	// in entries of TypeConfigOpV2 and TypeInstallConfigPolicies, in
	// format 3 snapshots and in forwarded decisions; and the reset of a
	// client (TypeResetClient).
	ClusterVersionPolicies = ClusterVersionOriginsAlways
	// ClusterVersionAudit is the same version again: operator actions
	// carry who made them and when (fsm.Audited; TypeConfigOpV2,
	// TypeSetTierV2, TypeResetClient), and groups keep the audit trail
	// (audit.go) in format 3 snapshots.
	ClusterVersionAudit = ClusterVersionOriginsAlways
	// ClusterVersionBackup is the same version again: every node can
	// stream a group's snapshot to another (cluster's /internal/snapshot),
	// so a backup can read every group at its leader.
	ClusterVersionBackup = ClusterVersionOriginsAlways

	// ClusterVersionIDMemory: a request id is remembered for its whole
	// window (DefaultDedupWindow), never forgotten early; a group that
	// remembers Options.RequestIDMax ids sheds a request with a new one
	// (Decision.Shed) instead. Groups keep ids by digest (idmemory.go), in
	// format 4 snapshots, and leaders send the shed flag in forwarded
	// decisions.
	ClusterVersionIDMemory uint32 = 3

	// MaxClusterVersion is the highest cluster version this binary can run.
	MaxClusterVersion = ClusterVersionIDMemory
)

// TypeSetClusterVersion raises the group's cluster version.
const TypeSetClusterVersion Type = 7

// SetClusterVersion raises the group's cluster version to Version; a lower
// or equal one is a no-op. It is only proposed once every member supports
// Version, so no replica that cannot apply what follows ever reads it. A
// replica whose binary supports less refuses to go on (see applyBytes).
type SetClusterVersion struct {
	Version uint32
}

// Type is TypeSetClusterVersion.
func (SetClusterVersion) Type() Type { return TypeSetClusterVersion }

func (s SetClusterVersion) appendPayload(b []byte) []byte {
	return binary.AppendUvarint(b, uint64(s.Version))
}

func decodeSetClusterVersion(r *reader) (Command, error) {
	v := r.Uvarint()
	if r.Err == nil && (v == 0 || v > 1<<31) {
		r.Fail("cluster version %d", v)
	}
	return SetClusterVersion{Version: uint32(v)}, r.Err
}

// ClusterVersionResult is the result of a SetClusterVersion.
type ClusterVersionResult struct {
	// Version is the cluster version in force after the entry.
	Version uint32
	// Changed reports whether the entry raised it.
	Changed bool
}

func (f *FSM) applySetClusterVersion(s SetClusterVersion) *ClusterVersionResult {
	if s.Version > MaxClusterVersion {
		// Applying what follows with older rules would diverge from the
		// replicas that know them.
		panic(fmt.Sprintf("fsm: the group moved to cluster version %d; this binary runs at most %d: run a newer binary", s.Version, MaxClusterVersion))
	}
	if s.Version <= f.clusterVersion {
		return &ClusterVersionResult{Version: f.clusterVersion}
	}
	f.clusterVersion = s.Version
	f.clusterVersionRead.Store(s.Version)
	return &ClusterVersionResult{Version: s.Version, Changed: true}
}

// ClusterVersion returns the group's cluster version, without taking the
// FSM's lock.
func (f *FSM) ClusterVersion() uint32 { return f.clusterVersionRead.Load() }

// TypeAllocateEpoch hands a node an origin epoch no other process had
// (from ClusterVersionOriginsAlways on; see AllocateEpoch).
const TypeAllocateEpoch Type = 8

// Origin epochs: the lower half of the 24-bit space is handed out by the
// meta group (AllocateEpoch), one per process, in turn, so no two
// processes share one until 2^23-1 more have started; the upper half is for
// a process's first epoch, chosen at random until it has been given one.
const (
	// AllocatedEpochs is how many epochs AllocateEpoch hands out before it
	// starts over at 1.
	AllocatedEpochs = 1<<23 - 1
	// RandomEpochBase is the first epoch of the random half.
	RandomEpochBase = 1 << 23
)

// AllocateEpoch gives the proposing node's process the group's next origin
// epoch. Only the meta group is asked for epochs.
type AllocateEpoch struct{}

// Type is TypeAllocateEpoch.
func (AllocateEpoch) Type() Type { return TypeAllocateEpoch }

func (AllocateEpoch) appendPayload(b []byte) []byte { return b }

func decodeAllocateEpoch(*reader) (Command, error) { return AllocateEpoch{}, nil }

// EpochResult is the result of an AllocateEpoch.
type EpochResult struct {
	Epoch uint32 // 1..AllocatedEpochs
}

func (f *FSM) applyAllocateEpoch(AllocateEpoch) *EpochResult {
	f.epochsAllocated++
	return &EpochResult{Epoch: uint32((f.epochsAllocated-1)%AllocatedEpochs) + 1}
}
