// Package cluster runs quorate's raft groups on a node: the meta group that
// holds the configuration and the data groups that hold client buckets. It
// routes each request to the leader of the group that owns the client,
// group-commits decisions, forwards to other nodes over the raft port, keeps
// every data group's configuration in step with the meta group, and places
// group replicas and leaders over the nodes that gossip finds.
//
// The Node puts together what its subpackages do on their own: one raft
// group's lifecycle, proposals and group commit (cluster/raftgroup), gossip
// and placement planning (cluster/membership), the internal RPC and its wire
// formats (cluster/peerrpc), and the errors they all answer with
// (cluster/errs). See ARCHITECTURE.md, section 4.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/cluster/admission"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/configsync"
	"github.com/quorate/quorate/cluster/diskguard"
	"github.com/quorate/quorate/cluster/fanout"
	"github.com/quorate/quorate/cluster/forward"
	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/memlimit"
	"github.com/quorate/quorate/cluster/metrics"
	"github.com/quorate/quorate/cluster/origin"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/placer"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/cluster/raftport"
	"github.com/quorate/quorate/cluster/reach"
	"github.com/quorate/quorate/cluster/route"
	"github.com/quorate/quorate/cluster/status"
	"github.com/quorate/quorate/cluster/versions"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/grouphash"
	"github.com/quorate/quorate/internal/version"
	"github.com/quorate/quorate/raftlog"
	"github.com/quorate/quorate/transport/raftmux"
	"github.com/quorate/quorate/transport/raftnet"
)

// Node is one quorate server: every group it hosts, its gossip membership,
// its internal RPC, and the loops that reconcile configuration, placement
// and idle buckets. Its methods are safe for concurrent use.
type Node struct {
	opts     Options
	logger   *slog.Logger
	raftAddr string // advertised raft (and RPC) address
	meta     *raftgroup.Group
	groups   []*raftgroup.Group
	metrics  *metrics.Collector
	mux      *raftmux.Mux
	net      *raftnet.Net // every group's raft traffic, one connection per peer
	rpcSrv   *http.Server
	rpc      *peerrpc.Client
	origins  *origin.Source
	configs  *configsync.Syncer // the data groups' configuration, in step with the meta group's
	versions *versions.Gate     // the cluster version: what every member runs, raising it
	rpcLn    *raftport.Layer    // the "rpc" layer, dialled to prove peers
	proofs   *membership.Proofs // nil without cluster TLS
	members  *membership.Gossip
	logs     *raftgroup.LogStores
	router   *route.Router // where each group is served, and running a request there
	reach    *reach.Judge  // when each peer last answered, and whether a group's quorum is in reach

	leaving    atomic.Bool
	placer     *placer.Placer
	pending    atomic.Int64     // decisions callers of Allow wait for
	disk       *diskguard.Guard // the data dir's free space
	clockGuard *clock.Guard     // the verdict on this node's clock
	mem        *memlimit.Budget // the memory budget (Options.MaxMemory)
	admission  *admission.Gate  // whether the node takes a call

	fwd         *forward.Pool // one batching forwarder per leader address
	decideGroup fanout.Decide // allowGroupAt
	startGroup  fanout.Start  // startGroupAt

	reconcileCh chan struct{}
	placementCh chan struct{}
	proveCh     chan struct{}
	leadsCh     chan struct{}
	stop        chan struct{}
	done        chan struct{} // closed when Close has finished
	wg          sync.WaitGroup
	closeOnce   sync.Once
	closeErr    error
}

// New opens the node's data dir, starts every group, gossip and the
// internal RPC, and returns once they are running (not necessarily led yet:
// see Ready). A node with an empty data dir and no Join list bootstraps a
// new cluster as the single voter of every group. A node with an empty
// data dir, a Join list and no Groups takes its cluster's group count
// (it starts with the default, and again with the count a member it was
// refused by has).
func New(opts Options) (*Node, error) {
	learn := opts.Groups == 0 && len(opts.Join) > 0 && raftgroup.IsNewDataDir(opts.DataDir)
	n, err := newNode(opts)
	var gce *membership.GroupCountError
	if err == nil || !learn || !errors.As(err, &gce) {
		return n, err
	}
	// A new node told no group count takes its cluster's: what it made of
	// its data dir so far is empty groups of the default count.
	if cerr := raftgroup.ClearDataDir(opts.DataDir); cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	opts.Groups = gce.Theirs
	if opts.Logger != nil {
		opts.Logger.Info("joining a cluster of another group count than the default: taking the cluster's", "groups", gce.Theirs)
	}
	return newNode(opts)
}

func newNode(opts Options) (*Node, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cf, err := raftgroup.CheckClusterFile(opts.DataDir, opts.NodeID, opts.Groups, opts.LogStore)
	if err != nil {
		return nil, err
	}
	opts.Groups, opts.LogStore = cf.Groups, cf.LogStore
	if was, err := raftgroup.PrivateDataDir(opts.DataDir); err != nil {
		return nil, fmt.Errorf("cluster: data dir: %w", err)
	} else if was != 0 {
		opts.Logger.Warn("the data dir was readable by other users (it holds every client and request id); it is now 0700",
			"data_dir", opts.DataDir, "was", was.String())
	}
	opts.Clock = clock.NewStamp(opts.Clock, func(ahead time.Duration) {
		opts.Logger.Warn("the wall clock stepped forward while the node runs; stamps follow the monotonic clock instead (restart the node to accept the new time)",
			"node", opts.NodeID, "ahead_by", ahead.String(), "max_step", clock.MaxClockStep.String())
	})
	ln, err := net.Listen("tcp", opts.RaftAddr)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft listener: %w", err)
	}
	n := &Node{
		opts:        opts,
		logger:      opts.Logger.With("node", opts.NodeID),
		raftAddr:    raftport.Advertised(opts.RaftAddr, ln.Addr()),
		origins:     origin.NewSource(),
		reconcileCh: make(chan struct{}, 1),
		placementCh: make(chan struct{}, 1),
		proveCh:     make(chan struct{}, 1),
		leadsCh:     make(chan struct{}, 1),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	n.versions = n.newVersionGate()
	n.placer = placer.New(placer.Config{
		Self: opts.NodeID, SelfAddr: n.raftAddr, Replicas: opts.Replicas, DeadAfter: opts.DeadAfter,
		Members:        n.trustedMembers,
		Groups:         n.allGroups,
		ClockOff:       func() bool { return n.clockGuard.State() != clock.InBounds },
		Leaving:        n.leaving.Load,
		ClusterVersion: n.ClusterVersion,
		Reached: func(addr string) bool {
			return time.Since(n.reach.Last(addr)) < opts.Raft.HeartbeatTimeout
		},
		Logger: n.logger,
	})
	n.reach = reach.NewJudge(time.Now, opts.NodeID, opts.Raft, n.allGroups)
	n.clockGuard = n.newClockGuard()
	n.disk = diskguard.New(opts.DataDir, opts.MinFreeDisk, n.logger)
	n.mem = memlimit.NewBudget(opts.MaxMemory, opts.readHeap, n.stateBytes, n.pending.Load, n.logger)
	n.fwd = forward.NewPool(n.forward, 4)
	n.decideGroup = n.allowGroupAt
	n.startGroup = n.startGroupAt
	n.admission = &admission.Gate{
		Disk: n.disk, Memory: n.mem, ClockErr: n.clockErr, MaxClients: opts.MaxClients,
		Groups:  func() []*raftgroup.Group { return n.groups },
		Pending: n.pending.Load,
	}
	n.metrics = metrics.New(metrics.Source{
		Groups: n.allGroups,
		Status: status.Group,
		Syncs:  func() uint64 { return n.logs.Syncs() },
		Clock:  opts.Clock,
		Guard:  n.clockGuard,
		Disk:   n.disk,
		Memory: n.mem,
	})
	n.mux = raftmux.New(ln, raftport.MuxOptions(opts.Groups, opts.TLS, n.logger))
	if opts.TLS != nil {
		n.proofs = membership.NewProofs()
	}
	n.router = n.newRouter()
	if err := n.start(); err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) start() error {
	opts := n.opts
	layer := func(name string) (*raftport.Layer, error) {
		l, err := n.mux.Layer(name)
		if err != nil {
			return nil, err
		}
		return raftport.NewLayer(l, n.raftAddr, opts.partition), nil
	}
	rpcLn, err := layer(peerrpc.LayerName)
	if err != nil {
		return err
	}
	n.rpcLn = rpcLn
	n.rpc = &peerrpc.Client{HTTP: &http.Client{Transport: &http.Transport{
		DialContext:         rpcLn.DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}}}
	n.configs = n.newConfigSyncer()
	n.rpcSrv = &http.Server{Handler: n.rpcHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = n.rpcSrv.Serve(rpcLn) }()
	netLn, err := layer(raftport.RaftLayer)
	if err != nil {
		return err
	}
	// Every group's raft traffic to a peer shares one connection; requests
	// without entries wait up to a third of the heartbeat timeout to share
	// a write, so every group's heartbeat to a peer leaves in one write
	// per tick (raftnet's doc says why; the lease must exceed the tick).
	n.net = raftnet.New(netLn, raft.ServerAddress(n.raftAddr), raftnet.Options{
		Tick:   opts.Raft.HeartbeatTimeout / 3,
		Logger: n.logger.With("component", "raftnet"),
	})
	n.net.Handle(forward.Method, n.serveForwarded)

	if n.logs, err = raftgroup.OpenLogStores(opts.DataDir, opts.LogStore, raftlog.Options{Logger: n.logger, MinSyncInterval: opts.WALSyncInterval}); err != nil {
		return err
	}
	// Every group's store first: a node that holds state in any group is a
	// member restarting, never a new cluster to bootstrap.
	stores, err := raftgroup.OpenStores(n.logs, opts.DataDir, opts.Groups)
	if err != nil {
		return err
	}
	defer stores.Close() // those of groups not opened, on failure
	bootstrap := !stores.Existing && len(opts.Join) == 0
	open := func(id string, index int, onServing func(*raftgroup.Group)) (*raftgroup.Group, error) {
		return stores.Open(raftgroup.Config{
			ID:        id,
			Index:     index,
			Bootstrap: bootstrap,
			NodeID:    opts.NodeID,
			Addr:      raft.ServerAddress(n.raftAddr),
			Timings:   opts.Raft,
			Logger:    n.logger,
			LogLevel:  opts.RaftLogLevel.Level(),
			FSMOpts:   fsm.Options{OnConfig: func(uint64) { n.triggerReconcile() }, RequestIDMax: opts.requestIDMax},
			OnServing: onServing,
			OnChange:  func() { kick(n.leadsCh); kick(n.placementCh) },
			OnContact: func(a raft.ServerAddress) { n.reach.Contact(string(a)) },
		}, func(id string) (raft.Transport, error) { return n.net.Transport(id) })
	}
	if n.meta, err = open(raftgroup.MetaGroupID, opts.Groups, n.configs.OnServingMeta); err != nil {
		return err
	}
	for i := range opts.Groups {
		g, err := open(strconv.Itoa(i), i, func(*raftgroup.Group) { n.triggerReconcile() })
		if err != nil {
			return err
		}
		g.Batch = raftgroup.NewBatcher(g, opts.Clock, opts.MaxBatch, opts.MaxInflight, n.metrics.ObserveBatch, n.triggerReconcile,
			func(reqs []fsm.AllowRequest) error { return n.admission.Admit(g, reqs) })
		n.groups = append(n.groups, g)
	}
	go func() { _ = n.mux.Serve() }()

	n.members, err = membership.New(membership.Config{
		NodeID: opts.NodeID, RaftAddr: n.raftAddr, HTTPAddr: opts.HTTPAddr, GossipAddr: opts.GossipAddr,
		Groups: opts.Groups, Keys: opts.GossipKeys, Logger: n.logger,
		ClockOff: n.clockGuard.State() != clock.InBounds,
		Version:  version.Binary, MaxClusterVersion: n.maxClusterVersion(),
		OnChange: func() { kick(n.placementCh); kick(n.proveCh); n.clockGuard.Kick() },
	})
	if err != nil {
		return err
	}
	if stores.Existing {
		// A restarting node already knows its groups' voters: raft works
		// without gossip, so find the other nodes in the background (they
		// may be restarting too).
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := n.joinWithRetry(0); err != nil && !errors.Is(err, ErrShuttingDown) {
				n.logger.Error("gossip join failed", "err", err)
			}
		}()
	} else if err := n.joinWithRetry(20); err != nil {
		return err
	}
	if err := n.metrics.Register(opts.Registerer, n.mux, n.net); err != nil {
		return fmt.Errorf("cluster: metrics: %w", err)
	}
	n.logger.Info("node started", "raft", n.raftAddr, "gossip", n.GossipAddr(), "bootstrap", bootstrap, "groups", opts.Groups, "log_store", opts.LogStore, "replicas", opts.Replicas,
		"cluster_tls", opts.TLS != nil, "gossip_encrypted", len(opts.GossipKeys) > 0)
	n.disk.Check()
	n.every(diskguard.CheckInterval, nil, n.disk.Check)
	n.mem.Check()
	n.every(memlimit.CheckInterval, nil, n.mem.Check)
	n.wg.Add(1)
	go func() { defer n.wg.Done(); n.clockGuard.Run(n.stop) }()
	n.every(time.Second, n.reconcileCh, n.reconcile)
	n.every(time.Second, n.proveCh, n.provePeers)
	n.every(opts.PlacementInterval, n.placementCh, n.placer.Place)
	n.every(2*time.Second, n.leadsCh, n.publishLeads)
	n.every(2*time.Second, nil, n.members.Reconnect)
	n.every(forward.IdlePeriod, nil, n.fwd.RetireIdle)
	n.every(n.reach.Window()/4, nil, n.reach.Tick)
	if opts.ReclaimInterval > 0 {
		n.every(opts.ReclaimInterval, nil, n.reclaim)
	}
	return nil
}

// joinWithRetry joins the gossip cluster, trying up to attempts times (0:
// until the node stops; see membership.Gossip.JoinRetrying).
func (n *Node) joinWithRetry(attempts int) error {
	if len(n.opts.Join) == 0 {
		return nil
	}
	switch err := n.members.JoinRetrying(n.opts.Join, attempts, n.stop, n.logger); {
	case errors.Is(err, membership.ErrStopped):
		return ErrShuttingDown
	case err != nil:
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// RaftAddr returns the address peers reach this node's raft and RPC at.
func (n *Node) RaftAddr() string { return n.raftAddr }

// GossipAddr returns the address this node gossips on.
func (n *Node) GossipAddr() string {
	if n.members == nil {
		return ""
	}
	return n.members.Addr()
}

// stateBytes is what the state of this node's replicas costs, as their
// FSMs estimate it (fsm.FSM.StateBytes): what the memory budget follows
// between collections.
func (n *Node) stateBytes() int64 {
	b := n.meta.FSM.StateBytes() // not allGroups: the budget asks on every decision, and that copies
	for _, g := range n.groups {
		b += g.FSM.StateBytes()
	}
	return b
}

// GroupOf returns the data group that owns client: FNV-1a (64-bit) of the
// client id, modulo the number of groups (internal/grouphash, the one
// definition the tools share).
func GroupOf(client string, groups int) int { return grouphash.Of(client, groups) }

func (n *Node) groupFor(client string) *raftgroup.Group {
	return n.groups[GroupOf(client, len(n.groups))]
}

func (n *Node) allGroups() []*raftgroup.Group {
	return append([]*raftgroup.Group{n.meta}, n.groups...)
}

func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (n *Node) triggerReconcile() { kick(n.reconcileCh) }

// every runs fn in its own goroutine every interval and whenever trigger
// fires (trigger may be nil), until the node stops.
func (n *Node) every(interval time.Duration, trigger <-chan struct{}, fn func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-n.stop:
				return
			case <-tick.C:
			case <-trigger:
			}
			fn()
		}
	}()
}

// reconcile raises the cluster version where this node may
// (versions.Gate.Raise), gets an origin epoch once it may, and brings every
// data group this node leads up to the meta group's configuration
// (configsync.Syncer.Reconcile).
func (n *Node) reconcile() {
	n.versions.Raise()
	n.allocateEpoch()
	n.configs.Reconcile()
}

// reclaim asks every data group this node leads to forget what it no
// longer needs: buckets that are full, and remembered decisions, origin
// marks and audit records past their time (fsm.Reclaimable). A reclaim is
// stamped like a decision, so a node whose clock is not in bounds proposes
// none. Every group on the node also lets go of its log cache if it
// stored nothing since the last reclaim.
func (n *Node) reclaim() {
	for _, g := range n.allGroups() {
		g.DropIdleCache()
	}
	if n.clockErr() != nil {
		return
	}
	for _, g := range n.groups {
		stamp := n.opts.Clock.Now().UnixNano()
		if !g.Serving() || !g.FSM.Reclaimable(stamp) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := g.ApplyLocal(ctx, fsm.Reclaim{Stamp: stamp})
		cancel()
		if err != nil {
			n.logger.Warn("reclaim failed", "group", g.ID, "err", err)
		} else if r, ok := res.(*fsm.ReclaimResult); ok && r.Buckets > 0 {
			n.logger.Debug("reclaimed idle buckets", "group", g.ID, "buckets", r.Buckets, "request_ids", r.Dedup)
		}
	}
}

// publishLeads publishes, through gossip, which groups this node serves,
// so that nodes holding no replica of a group can still find its leader.
func (n *Node) publishLeads() {
	leads := make([]bool, len(n.groups)+1)
	for _, g := range n.allGroups() {
		leads[g.Index] = g.Serving()
	}
	n.members.SetLeads(leads)
}
