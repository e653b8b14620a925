// Package cluster runs quorate's raft groups on a node: the meta group that
// holds the configuration and the data groups that hold client buckets. It
// routes each request to the group that owns the client, group-commits
// decisions, and keeps every data group's configuration in step with the
// meta group.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/quorate/quorate/fsm"
)

// Node is one quorate server: every group it hosts, and the loops that
// reconcile configuration and reclaim idle buckets. Its methods are safe for
// concurrent use.
type Node struct {
	opts    Options
	logger  *slog.Logger
	meta    *group
	groups  []*group
	metrics *nodeMetrics

	reconcileCh chan struct{}
	stop        chan struct{}
	wg          sync.WaitGroup
	closeOnce   sync.Once
	closeErr    error
}

// clusterFile records facts fixed when the node's data dir was created.
type clusterFile struct {
	NodeID string `json:"node_id"`
	Groups int    `json:"groups"`
}

// New opens the node's data dir, starts every group and returns once they
// are running (not necessarily led yet: see Ready). A node with an empty
// data dir bootstraps itself as the single voter of every group.
func New(opts Options) (*Node, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkClusterFile(opts); err != nil {
		return nil, err
	}
	n := &Node{
		opts:        opts,
		logger:      opts.Logger,
		reconcileCh: make(chan struct{}, 1),
		stop:        make(chan struct{}),
	}
	n.metrics = newNodeMetrics(n)

	open := func(id, dir string, onLeader func(*group)) (*group, error) {
		addr := raft.ServerAddress(opts.RaftAddr + "/" + id)
		_, trans := raft.NewInmemTransport(addr)
		return openGroup(groupConfig{
			id:       id,
			dir:      filepath.Join(opts.DataDir, "groups", dir),
			nodeID:   opts.NodeID,
			addr:     addr,
			trans:    trans,
			timings:  opts.Raft,
			logger:   opts.Logger,
			logLevel: opts.RaftLogLevel.Level(),
			onLeader: onLeader,
		})
	}
	n.meta, err = open(metaGroupID, metaGroupID, n.onMetaLeader)
	if err != nil {
		return nil, err
	}
	for i := range opts.Groups {
		g, err := open(strconv.Itoa(i), fmt.Sprintf("g%03d", i), func(*group) { n.triggerReconcile() })
		if err != nil {
			_ = n.Close()
			return nil, err
		}
		g.batch = newBatcher(g, opts.Clock, opts.MaxBatch, opts.MaxInflight, n.metrics.observeBatch)
		n.groups = append(n.groups, g)
	}
	if err := n.metrics.register(opts.Registerer); err != nil {
		_ = n.Close()
		return nil, fmt.Errorf("cluster: metrics: %w", err)
	}
	n.wg.Add(2)
	go n.reconcileLoop()
	go n.reclaimLoop()
	return n, nil
}

func checkClusterFile(opts Options) error {
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(opts.DataDir, "quorate.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		data, _ = json.MarshalIndent(clusterFile{NodeID: opts.NodeID, Groups: opts.Groups}, "", "  ")
		return os.WriteFile(path, append(data, '\n'), 0o644)
	}
	if err != nil {
		return err
	}
	var cf clusterFile
	if err := json.Unmarshal(data, &cf); err != nil {
		return fmt.Errorf("cluster: %s: %w", path, err)
	}
	if cf.Groups != opts.Groups {
		return fmt.Errorf("cluster: data dir %s was created with %d groups, not %d: the group count is fixed when a cluster is created", opts.DataDir, cf.Groups, opts.Groups)
	}
	if cf.NodeID != opts.NodeID {
		return fmt.Errorf("cluster: data dir %s belongs to node %q, not %q", opts.DataDir, cf.NodeID, opts.NodeID)
	}
	return nil
}

// GroupOf returns the data group that owns client: FNV-1a (64-bit) of the
// client id, modulo the number of groups.
func GroupOf(client string, groups int) int {
	h := fnv.New64a()
	h.Write([]byte(client))
	return int(h.Sum64() % uint64(groups))
}

func (n *Node) groupFor(client string) *group {
	return n.groups[GroupOf(client, len(n.groups))]
}

// onMetaLeader seeds a new cluster's configuration.
func (n *Node) onMetaLeader(g *group) {
	if g.fsm.Config().Version != 0 {
		n.triggerReconcile()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.apply(ctx, fsm.InstallConfig{Config: n.opts.Initial}); err != nil {
		n.logger.Error("seeding the configuration failed; it will be retried at the next election", "err", err)
		return
	}
	n.logger.Info("configuration seeded", "version", n.opts.Initial.Version, "tiers", len(n.opts.Initial.Tiers))
	n.triggerReconcile()
}

func (n *Node) triggerReconcile() {
	select {
	case n.reconcileCh <- struct{}{}:
	default:
	}
}

// reconcileLoop brings every data group this node leads up to the meta
// group's configuration version, by proposing the whole configuration into
// the group's own log. A group that cannot be reached now is retried on the
// next trigger or tick.
func (n *Node) reconcileLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		case <-n.reconcileCh:
		}
		want := n.meta.fsm.Config()
		var wg sync.WaitGroup
		for _, g := range n.groups {
			if !g.serving.Load() || g.fsm.Config().Version >= want.Version {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := g.apply(ctx, fsm.InstallConfig{Config: want}); err != nil {
					n.logger.Warn("config reconcile failed", "group", g.id, "version", want.Version, "err", err)
				}
			}()
		}
		wg.Wait()
	}
}

// reclaimLoop periodically asks every data group this node leads to forget
// buckets that are full.
func (n *Node) reclaimLoop() {
	defer n.wg.Done()
	if n.opts.ReclaimInterval < 0 {
		return
	}
	tick := time.NewTicker(n.opts.ReclaimInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		for _, g := range n.groups {
			if b, _, _ := g.fsm.Stats(); !g.serving.Load() || b == 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			res, err := g.apply(ctx, fsm.Reclaim{Stamp: n.opts.Clock.Now().UnixNano()})
			cancel()
			if err != nil {
				n.logger.Warn("reclaim failed", "group", g.id, "err", err)
			} else if r, ok := res.(*fsm.ReclaimResult); ok && r.Buckets > 0 {
				n.logger.Debug("reclaimed idle buckets", "group", g.id, "buckets", r.Buckets, "request_ids", r.Dedup)
			}
		}
	}
}

// Close stops the node: queued requests fail with ErrShuttingDown, raft
// stops, stores are closed. Acknowledged decisions are already durable.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.wg.Wait()
		var errs []error
		for _, g := range n.groups {
			errs = append(errs, g.close())
		}
		if n.meta != nil {
			errs = append(errs, n.meta.close())
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}
