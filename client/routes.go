package client

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/internal/grouphash"
)

// routeTable is the client's copy of GET /v1/routes.
type routeTable struct {
	mu      sync.RWMutex
	groups  int // 0 until the first fetch
	version uint64
	leaders map[int]string
	// fetching is set while a refresh runs; last is when the last one began.
	fetching bool
	last     time.Time
}

// minRefreshGap spaces the refreshes that misses and failures ask for, so a
// cluster without leaders is not asked for routes by every call.
const minRefreshGap = 20 * time.Millisecond

// leaderOf returns client's group and its leader's base URL, as far as the
// table knows (-1 and "" before the first fetch).
func (t *routeTable) leaderOf(client string) (group int, leader string) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.groups <= 0 {
		return -1, ""
	}
	g := grouphash.Of(client, t.groups)
	return g, t.leaders[g]
}

// nodes returns the leaders' base URLs: nodes the endpoints may not name.
func (t *routeTable) nodes() map[int]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.leaders
}

// set installs rt, unless the table already holds a newer version.
func (t *routeTable) set(rt api.RoutesResponse, leaders map[int]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.groups == rt.Groups && rt.Version < t.version {
		return
	}
	t.groups, t.version, t.leaders = rt.Groups, rt.Version, leaders
}

// begin reports whether a refresh may start now, and marks it started.
func (t *routeTable) begin(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fetching || now.Sub(t.last) < minRefreshGap {
		return false
	}
	t.fetching, t.last = true, now
	return true
}

func (t *routeTable) end() {
	t.mu.Lock()
	t.fetching = false
	t.mu.Unlock()
}

// routesSeen is told the routes version node answered with; a version
// above the table's means leaderships moved since it was fetched.
func (c *Client) routesSeen(node string, v uint64) {
	c.routes.mu.RLock()
	stale := v > c.routes.version
	c.routes.mu.RUnlock()
	if stale {
		c.refreshRoutes(node)
	}
}

// refreshRoutes fetches the routes in the background (from first, if
// given, then the other nodes), unless a fetch is running or one began
// within minRefreshGap.
func (c *Client) refreshRoutes(first string) {
	select {
	case <-c.closed:
		return
	default:
	}
	if !c.routes.begin(c.now()) {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		defer c.routes.end()
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.AttemptTimeout)
		defer cancel()
		if _, err := c.fetchRoutes(ctx, first); err == nil {
			c.stats.routeRefreshes.Add(1)
		}
	}()
}

// fetchRoutes asks first (if given) and then every known node in turn for
// GET /v1/routes and installs the first answer.
func (c *Client) fetchRoutes(ctx context.Context, first string) (api.RoutesResponse, error) {
	order := c.nodes.order(first, c.routes.nodes())
	var last error = fmt.Errorf("client: no node to ask for routes")
	for _, node := range order {
		var rt api.RoutesResponse
		if err := c.call(ctx, node, "GET", "/v1/routes", nil, &rt, time.Time{}); err != nil {
			last = err
			continue
		}
		if rt.Groups <= 0 || rt.Hash != api.RoutesHash {
			last = fmt.Errorf("client: %s routes by %q over %d groups; this client knows %q", node, rt.Hash, rt.Groups, api.RoutesHash)
			continue
		}
		leaders := make(map[int]string, len(rt.Leaders))
		for k, u := range rt.Leaders {
			g, err := strconv.Atoi(k)
			if err != nil || g < 0 || g >= rt.Groups {
				continue
			}
			if u, err := baseURL(u); err == nil {
				leaders[g] = u
			}
		}
		c.routes.set(rt, leaders)
		return rt, nil
	}
	return api.RoutesResponse{}, last
}
