//go:build linux

package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/quorate/quorate/internal/clusterview"
)

// requestTimeout bounds each control request to a node.
const requestTimeout = 2 * time.Second

// do sends one request and returns the status and body. A nil body sends
// none; otherwise it is JSON.
func (c *Cluster) do(ctx context.Context, method, url string, body []byte, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b, err
}

// view asks node i for GET /v1/cluster.
func (c *Cluster) view(ctx context.Context, i int) (clusterview.View, error) {
	var v clusterview.View
	code, body, err := c.do(ctx, http.MethodGet, c.NodeURL(i)+"/v1/cluster", nil, requestTimeout)
	if err != nil {
		return v, err
	}
	if code != http.StatusOK {
		return v, fmt.Errorf("GET /v1/cluster: %d %s", code, bytes.TrimSpace(body))
	}
	return v, json.Unmarshal(body, &v)
}

// reachable returns the nodes that run and are not paused.
func (c *Cluster) reachable() []int {
	var out []int
	for i := 1; i <= c.opts.Nodes; i++ {
		if c.Running(i) && !c.Paused(i) {
			out = append(out, i)
		}
	}
	return out
}

// views asks each of nodes for its view, concurrently; nodes that fail
// are left out, with their errors.
func (c *Cluster) views(ctx context.Context, nodes []int) (map[int]clusterview.View, map[int]error) {
	return clusterview.Gather(ctx, nodes, c.view)
}

// Leader returns the node (1..N) that leads groupID ("meta", "0", ...) as
// the running, unpaused nodes report it: a node whose own view says it is
// Leader, the highest term winning. It asks once; ErrNoLeader if none does.
func (c *Cluster) Leader(ctx context.Context, groupID string) (int, error) {
	vs, _ := c.views(ctx, c.reachable())
	if l, _, ok := clusterview.Leader(vs, groupID); ok {
		return l, nil
	}
	return 0, fmt.Errorf("control: group %s: %w", groupID, ErrNoLeader)
}

// waitLeader polls Leader until it finds one or ctx is done.
func (c *Cluster) waitLeader(ctx context.Context, groupID string) (int, error) {
	for {
		l, err := c.Leader(ctx, groupID)
		if err == nil {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitReady waits until every running, unpaused node answers /readyz with
// 200 and, in the nodes' GET /v1/cluster, every group has a leader among
// them whose own view lists the expected voters (min(--replicas, N)). Set
// a deadline on ctx; the error names what was still missing.
func (c *Cluster) WaitReady(ctx context.Context) error {
	last := ""
	for {
		err := c.readyOnce(ctx)
		if err == nil {
			return nil
		}
		if err.Error() != last {
			last = err.Error()
			c.log.Debug("not ready yet", "reason", last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("control: cluster not ready: %w (%v)", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) readyOnce(ctx context.Context) error {
	nodes := c.reachable()
	if len(nodes) == 0 {
		return errors.New("no node is running")
	}
	for _, i := range nodes {
		code, body, err := c.do(ctx, http.MethodGet, c.NodeURL(i)+"/readyz", nil, requestTimeout)
		if err != nil {
			return fmt.Errorf("%s /readyz: %w", nodeID(i), err)
		}
		if code != http.StatusOK {
			return fmt.Errorf("%s /readyz: %d %s", nodeID(i), code, bytes.TrimSpace(body))
		}
	}
	vs, errs := c.views(ctx, nodes)
	for _, i := range nodes {
		if err := errs[i]; err != nil {
			return fmt.Errorf("%s: %w", nodeID(i), err)
		}
	}
	return checkViews(vs, c.voters)
}

// checkViews is the pure part of readiness: every group that any view
// lists has a self-reported leader, and the leader lists wantVoters voters.
func checkViews(vs map[int]clusterview.View, wantVoters int) error {
	var gids []string
	for _, v := range vs {
		for _, g := range v.Groups {
			if !slices.Contains(gids, g.ID) {
				gids = append(gids, g.ID)
			}
		}
	}
	if len(gids) == 0 {
		return errors.New("no groups in GET /v1/cluster")
	}
	slices.Sort(gids)
	for _, gid := range gids {
		l, g, ok := clusterview.Leader(vs, gid)
		if !ok {
			return fmt.Errorf("group %s: no leader", gid)
		}
		if len(g.Voters) != wantVoters {
			return fmt.Errorf("group %s: leader %s has voters %v, want %d", gid, nodeID(l), g.Voters, wantVoters)
		}
	}
	return nil
}

// waitNodeReady waits until node i answers /readyz with 200, failing at
// once if its process exits.
func (c *Cluster) waitNodeReady(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, p, err := c.liveProc(i)
		if err != nil {
			return fmt.Errorf("control: %s exited; %s ends with:\n%s", nodeID(i), c.LogPath(i), tailFile(c.LogPath(i), 15))
		}
		code, _, err := c.do(ctx, http.MethodGet, c.NodeURL(i)+"/readyz", nil, requestTimeout)
		if err == nil && code == http.StatusOK {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("control: %s (pid %d) not ready: %v", nodeID(i), p.pid, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
