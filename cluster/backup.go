package cluster

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/quorate/quorate/cluster/backup"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/internal/version"
)

// Backup writes a backup of the whole cluster to w (the format of package
// backup): each data group's state, then the meta group's, each read at
// its leader after the leader confirmed its leadership, so a group's
// section holds every decision acknowledged before it was read. Groups are
// read one after the other, not at one instant: a decision acknowledged
// while the backup runs may or may not be in it. The meta group comes
// last, so its configuration is never older than one a data group holds.
//
// Below ClusterVersionBackup it writes nothing and fails with
// ErrClusterVersion. Nothing is held in memory but a chunk: a group led elsewhere streams
// from its leader. A failure before a group's first byte is retried at its
// leader (as decisions are) until ctx ends; after it, Backup fails and w
// holds an incomplete backup that every reader refuses.
func (n *Node) Backup(ctx context.Context, w io.Writer) (backup.Header, error) {
	if v := n.ClusterVersion(); v < fsm.ClusterVersionBackup {
		return backup.Header{}, fmt.Errorf("%w: a backup needs cluster version %d, the cluster is at %d (a node of the release before cannot stream its groups)", ErrClusterVersion, fsm.ClusterVersionBackup, v)
	}
	h := backup.Header{
		CreatedUnixNano: time.Now().UnixNano(),
		Binary:          version.Binary,
		ClusterVersion:  n.ClusterVersion(),
		Groups:          len(n.groups),
		TakenBy:         n.opts.NodeID,
	}
	return h, backup.Write(w, h, func(id string, w io.Writer) error { return n.backupGroup(ctx, n.groupByID(id), w) })
}

// backupGroup writes group g's snapshot, read at its leader, to w.
func (n *Node) backupGroup(ctx context.Context, g *raftgroup.Group, w io.Writer) error {
	return n.router.AtLeader(ctx, g,
		func() error {
			write, err := n.snapshotLocal(ctx, g)
			if err != nil {
				return err
			}
			return write(w)
		},
		func(addr string) error {
			rc, err := peerrpc.Stream(ctx, n.rpc, addr, "/internal/snapshot", peerrpc.GroupReq{Group: g.ID})
			if err != nil {
				return err
			}
			defer rc.Close()
			if _, err := io.Copy(w, rc); err != nil {
				return fmt.Errorf("%w: streaming from %s: %v", ErrUnavailable, addr, err)
			}
			return nil
		})
}

// snapshotLocal is the leader's side of a group's backup: once it has
// confirmed its leadership, what writes the group's state.
func (n *Node) snapshotLocal(ctx context.Context, g *raftgroup.Group) (func(io.Writer) error, error) {
	if err := g.VerifyRead(ctx); err != nil {
		return nil, err
	}
	return g.FSM.WriteSnapshot, nil
}

// serveSnapshot answers /internal/snapshot for a group this node leads.
func (n *Node) serveSnapshot(ctx context.Context, req peerrpc.GroupReq) (func(io.Writer) error, error) {
	if g := n.groupByID(req.Group); g != nil {
		return n.snapshotLocal(ctx, g)
	}
	return nil, fmt.Errorf("cluster: no group %q here", req.Group)
}

// groupByID returns this node's group named id, or nil.
func (n *Node) groupByID(id string) *raftgroup.Group {
	for _, g := range n.allGroups() {
		if g.ID == id {
			return g
		}
	}
	return nil
}
