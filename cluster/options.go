package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/configsync"
	"github.com/quorate/quorate/cluster/diskguard"
	"github.com/quorate/quorate/cluster/memlimit"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/raftport"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/transport/peertls"
)

// Options configure a Node. Zero fields take the defaults documented on
// each; Options is passed to New and never read again after it returns.
type Options struct {
	// NodeID names the node in raft and in membership. Required.
	NodeID string
	// DataDir holds every group's raft log, stable store and snapshots. Required.
	DataDir string
	// RaftAddr is the address other nodes reach this node's raft traffic at.
	RaftAddr string
	// HTTPAddr is the address of this node's HTTP API, as shown in Status
	// and gossiped to other nodes.
	HTTPAddr string
	// GossipAddr is the host:port memberlist binds and advertises
	// ("127.0.0.1:7072" if empty; port 0 picks a free port).
	GossipAddr string
	// Join lists gossip addresses of existing members. A node with no state
	// and nothing to join bootstraps a new cluster; a node with no state and
	// a join list waits to be added as a voter by the group leaders.
	Join []string
	// Replicas is the number of voters per group, R (DefaultReplicas if
	// zero); a group has min(R, live nodes) voters.
	Replicas int
	// DeadAfter is how long a node must have been dead before the group
	// leaders remove it from their voters and re-place its replicas
	// (DefaultDeadAfter if zero).
	DeadAfter time.Duration
	// PlacementInterval is how often group leaders reconcile voters and
	// leadership with membership (DefaultPlacementInterval if zero).
	PlacementInterval time.Duration
	// Groups is the number of data groups, fixed when the cluster is created.
	// Zero means the data dir's (DefaultGroups for a new data dir); a node
	// refuses to start with a data dir
	// created with another number.
	Groups int
	// LogStore is the raft log layout, LogStoreShared or LogStoreBoltDB. A
	// data dir keeps the layout it was created with: empty means that one
	// (LogStoreShared for a new data dir), and any other is refused.
	LogStore string
	// WALSyncInterval, if positive, spaces the fsyncs of the shared log
	// store at least this far apart, so that more commits share each: less
	// CPU where nodes saturate their cores, up to a millisecond more
	// latency per decision on a quiet node (raftlog.Options.MinSyncInterval
	// says why). Zero, the default, spaces nothing.
	WALSyncInterval time.Duration
	// Initial seeds the configuration of a new cluster: its default policy
	// and tiers are installed as configuration version 1 when the meta group
	// first has a leader and holds version 0. Later changes go through the
	// API. A zero Default means bucket.BuiltinDefault; the default must be
	// valid and tier policies must be valid.
	Initial bucket.Config
	// Clock stamps proposals (clock.System if nil).
	Clock clock.Clock
	// Logger receives the node's and raft's logs (slog.Default if nil).
	Logger *slog.Logger
	// RaftLogLevel filters raft's own logs (slog.LevelWarn if nil).
	RaftLogLevel slog.Leveler
	// Registerer receives the node's metrics (none registered if nil).
	Registerer prometheus.Registerer
	// MaxBatch is the most decisions in one log entry (DefaultMaxBatch if zero).
	MaxBatch int
	// MaxInflight is how many allow entries a group leader keeps in flight
	// at once (DefaultMaxInflight if zero). Requests that arrive while the
	// limit is reached ride in the next entry.
	MaxInflight int
	// MaxPending is the most decisions this node's callers may wait for at
	// once; past it a call is refused with ErrOverloaded at once instead of
	// queueing (DefaultMaxPending if zero).
	MaxPending int
	// MaxClients is the most buckets this node may hold, over all the groups
	// it has a replica of: past it, a request for a client without a bucket
	// is refused with ErrTooManyClients and known clients are still served
	// (DefaultMaxClients if zero; negative: no limit).
	MaxClients int
	// MaxMemory is this node's memory budget in bytes: near it, the node
	// refuses new clients and request ids (ErrOverloaded) and serves the
	// clients it holds (memlimit.Default if zero; negative: no budget).
	// See memlimit.Budget.
	MaxMemory int64
	// MaxClockOffset is how far this node's clock may be from most of its
	// peers' before it stops deciding and leading (DefaultMaxClockOffset if
	// zero; negative: no check). See clock.Guard.
	MaxClockOffset time.Duration
	// MinFreeDisk is the free space, in bytes, the node keeps in its data
	// dir's file system: below it, new decisions are refused with
	// ErrDiskFull and the node is not ready (DefaultMinFreeDisk if zero;
	// negative: no check).
	MinFreeDisk int64
	// ReclaimInterval is how often a group leader forgets full buckets
	// (DefaultReclaimInterval if zero; negative disables reclamation).
	ReclaimInterval time.Duration
	// Raft holds the raft timings (DefaultRaftTimings if zero).
	Raft RaftTimings
	// TLS, if set, makes the raft port speak mutual TLS with the cluster
	// CA (raft and the internal RPC alike), and makes placement trust a
	// gossip member only once it proved its node id with a certificate
	// (see membership.Proofs). Its certificate must name NodeID. Nil: plain TCP,
	// and gossip metadata is trusted as it is.
	TLS *peertls.Config
	// GossipKeys, if set, encrypt gossip (memberlist's keyring): the first
	// key encrypts what this node sends, every key is tried on what it
	// receives. Each is 16, 24 or 32 bytes.
	GossipKeys [][]byte

	// partition, set only by this package's tests, cuts links between nodes.
	partition *Partition
	// maxClusterVersion, set only by this package's tests, makes the node
	// claim a lower highest cluster version than its binary's, as a node of
	// an older release would (zero: fsm.MaxClusterVersion).
	maxClusterVersion uint32
	// requestIDMax, set only by this package's tests, is every group's
	// fsm.Options.RequestIDMax (zero: the default).
	requestIDMax int
	// readHeap, set only by this package's tests, replaces the runtime's
	// heap readings of the memory budget (memlimit.NewBudget).
	readHeap func() (live, objects, cycles uint64)
}

// Partition is a table of cut links between nodes, for tests that
// partition an in-process cluster (see raftport.Partition).
type Partition = raftport.Partition

// RaftTimings are the raft timeouts every group uses (raftgroup.Timings).
type RaftTimings = raftgroup.Timings

// MaxWALSyncInterval bounds Options.WALSyncInterval: every decision may
// wait that long for its fsync.
const MaxWALSyncInterval = 10 * time.Millisecond

// Log store layouts (Options.LogStore): see raftgroup.LogStoreShared and
// raftgroup.LogStoreBoltDB.
const (
	LogStoreShared = raftgroup.LogStoreShared // one pebble database per node, fsyncs shared by the groups (the default)
	LogStoreBoltDB = raftgroup.LogStoreBoltDB // a raft-boltdb/v2 file per group
)

// Defaults.
const (
	DefaultGroups            = raftgroup.DefaultGroups
	DefaultMaxBatch          = 4096
	DefaultMaxInflight       = 2
	DefaultMaxPending        = 100_000
	DefaultMaxClients        = 5_000_000
	DefaultReclaimInterval   = time.Minute
	DefaultReplicas          = 3
	DefaultDeadAfter         = 30 * time.Second
	DefaultPlacementInterval = time.Second
	// DefaultMinFreeDisk is the free space a node keeps in its data dir's
	// file system (see diskguard.Guard).
	DefaultMinFreeDisk = diskguard.DefaultMinFree
)

// LoopbackRaftTimings suit nodes on one machine (tests, a local cluster):
// elections in tens of milliseconds, no snapshots unless asked for.
var LoopbackRaftTimings = raftgroup.LoopbackTimings

// DefaultRaftTimings suit a LAN: a crashed leader is replaced in about a
// second.
var DefaultRaftTimings = raftgroup.DefaultTimings

// positiveOr is v, or d when v is not positive.
func positiveOr[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

func (o Options) withDefaults() (Options, error) {
	if o.NodeID == "" {
		return o, errors.New("cluster: NodeID is required")
	}
	if o.DataDir == "" {
		return o, errors.New("cluster: DataDir is required")
	}
	if o.Groups < 0 || o.Groups > 1024 {
		return o, fmt.Errorf("cluster: groups must be 1..1024, got %d", o.Groups)
	}
	if o.WALSyncInterval < 0 || o.WALSyncInterval > MaxWALSyncInterval {
		return o, fmt.Errorf("cluster: WAL sync interval must be 0..%s, got %s", MaxWALSyncInterval, o.WALSyncInterval)
	}
	switch o.LogStore {
	case "", LogStoreShared, LogStoreBoltDB:
	default:
		return o, fmt.Errorf("cluster: log store must be %q or %q, got %q", LogStoreShared, LogStoreBoltDB, o.LogStore)
	}
	var err error
	if o.Initial, err = configsync.Initial(o.Initial); err != nil {
		return o, fmt.Errorf("cluster: initial configuration: %w", err)
	}
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RaftLogLevel == nil {
		o.RaftLogLevel = slog.LevelWarn
	}
	o.MaxPending = positiveOr(o.MaxPending, DefaultMaxPending)
	o.MaxClockOffset = cmp.Or(o.MaxClockOffset, DefaultMaxClockOffset)
	o.MinFreeDisk = cmp.Or(o.MinFreeDisk, DefaultMinFreeDisk)
	switch {
	case o.MaxMemory == 0:
		o.MaxMemory = memlimit.Default()
	case o.MaxMemory < 0:
		o.MaxMemory = 0
	}
	o.MaxClients = cmp.Or(o.MaxClients, DefaultMaxClients)
	o.MaxBatch = positiveOr(o.MaxBatch, DefaultMaxBatch)
	if o.MaxBatch > fsm.MaxBatch {
		return o, fmt.Errorf("cluster: max batch must be at most %d (what an entry may carry), got %d", fsm.MaxBatch, o.MaxBatch)
	}
	o.MaxInflight = positiveOr(o.MaxInflight, DefaultMaxInflight)
	o.ReclaimInterval = cmp.Or(o.ReclaimInterval, DefaultReclaimInterval)
	o.Raft = cmp.Or(o.Raft, DefaultRaftTimings)
	o.RaftAddr = cmp.Or(o.RaftAddr, "127.0.0.1:7071")
	o.GossipAddr = cmp.Or(o.GossipAddr, "127.0.0.1:7072")
	o.Replicas = cmp.Or(o.Replicas, DefaultReplicas)
	if o.Replicas < 1 || o.Replicas > 7 {
		return o, fmt.Errorf("cluster: replicas must be 1..7, got %d", o.Replicas)
	}
	o.DeadAfter = positiveOr(o.DeadAfter, DefaultDeadAfter)
	o.PlacementInterval = positiveOr(o.PlacementInterval, DefaultPlacementInterval)
	if o.TLS != nil && !peertls.Names(o.TLS.Cert, o.NodeID) {
		return o, fmt.Errorf("cluster: the cluster certificate names %q, not this node (%q): peers would refuse to place it", o.TLS.Cert.Subject.CommonName, o.NodeID)
	}
	for i, k := range o.GossipKeys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return o, fmt.Errorf("cluster: gossip key %d is %d bytes, want 16, 24 or 32", i+1, n)
		}
	}
	return o, nil
}
