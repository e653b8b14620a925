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
	// spent twice. Snapshots carry the cluster version (format 3).
	ClusterVersionOriginsAlways uint32 = 2

	// MaxClusterVersion is the highest cluster version this binary can run.
	MaxClusterVersion = ClusterVersionOriginsAlways
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
