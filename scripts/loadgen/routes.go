package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/internal/grouphash"
	"github.com/quorate/quorate/internal/loopback"
)

// router sends each key straight to its group's leader, as a leader-aware
// client would: it reads GET /v1/routes (the table every node serves) and
// re-reads it every routesRefresh while the run lasts. A key whose group
// has no known leader goes to the connection's own target, which forwards
// it. A stale table costs an extra hop, never a wrong answer.
type router struct {
	hc      *http.Client
	source  string // base URL routes are read from
	table   atomic.Pointer[routeTable]
	refresh atomic.Int64 // tables read
}

type routeTable struct {
	groups  int
	leaders map[int]string // group -> base URL of its leader
}

const routesRefresh = 500 * time.Millisecond

// routesDoc is the body of GET /v1/routes.
type routesDoc struct {
	Groups  int               `json:"groups"`
	Hash    string            `json:"hash"`
	Version uint64            `json:"version"`
	Leaders map[string]string `json:"leaders"`
}

func newRouter(ctx context.Context, hc *http.Client, source string) (*router, error) {
	r := &router{hc: hc, source: strings.TrimRight(source, "/")}
	if err := r.read(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *router) read(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.source+"/v1/routes", nil)
	if err != nil {
		return err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("routes: %s answered %s", r.source, resp.Status)
	}
	var doc routesDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	if doc.Hash != grouphash.Name || doc.Groups < 1 {
		return fmt.Errorf("routes: hash %q over %d groups; this load generator knows %s", doc.Hash, doc.Groups, grouphash.Name)
	}
	t := &routeTable{groups: doc.Groups, leaders: map[int]string{}}
	for g, url := range doc.Leaders {
		i, err := strconv.Atoi(g)
		if err != nil || i < 0 || i >= doc.Groups {
			return fmt.Errorf("routes: group %q", g)
		}
		if err := loopback.CheckURL(url); err != nil {
			return fmt.Errorf("routes: group %s: %w", g, err)
		}
		t.leaders[i] = strings.TrimRight(url, "/")
	}
	r.table.Store(t)
	r.refresh.Add(1)
	return nil
}

// run re-reads the table until ctx ends; a failed read keeps the old one.
func (r *router) run(ctx context.Context) {
	t := time.NewTicker(routesRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = r.read(ctx)
		}
	}
}

// target returns where key should go, or fallback when its group's leader
// is not known.
func (r *router) target(key, fallback string) string {
	t := r.table.Load()
	if url, ok := t.leaders[grouphash.Of(key, t.groups)]; ok {
		return url
	}
	return fallback
}
