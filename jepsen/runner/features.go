package runner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/history"
	"github.com/quorate/quorate/jepsen/workload"
)

// Window keys: workload.WindowKey(0..WindowKeys-1) are in tier "win", a
// sliding window of WindowLimit per WindowSeconds, with WindowFraction of
// the operations: enough to be denied most of the time and admitted
// WindowLimit at every window's turn, so that a run crosses many windows.
// During the run the limit is cut to half and restored (on_raise keep).
// Only on a cluster at version 2 (not during an upgrade roll, whose nodes
// start on a release without windows).
const (
	WindowTier     = "win"
	WindowKeys     = 2
	WindowLimit    = 20
	WindowSeconds  = 5
	WindowFraction = 0.06
)

// Fill keys: workload.FillKey(0..FillKeys-2) are in tier "fill"
// (FillCapacity tokens, FillRate per second: drained all the time by their
// FillFraction of the operations), which the run raises to FillRaised with
// on_raise fill and lowers again, so that every raise refills them at a
// point of each group's log; FillKey(FillKeys-1) starts in "hot" and is
// moved between "hot" and "fill" with the mover keys, so that it is
// sometimes moved in after a raise (and must not be filled by it). The
// changes with on_raise fill wait for cluster version 2.
const (
	FillTier     = "fill"
	FillKeys     = 3
	FillCapacity = 10
	FillRaised   = 20
	FillRate     = "1"
	FillFraction = 0.06
)

// minFeatureVersion is the cluster version sliding windows and on_raise
// need.
const minFeatureVersion = 2

// clusterVersion is the highest cluster version any node reports now (0
// if none answers).
func clusterVersion(ctx context.Context, w *versionWatch) int {
	v := 0
	for _, url := range w.targets {
		if cv, err := w.read(ctx, url); err == nil {
			v = max(v, versionOf(cv))
		}
	}
	return v
}

// waitClusterVersion polls every 200 ms, for at most limit, until a node
// reports cluster version v or more.
func waitClusterVersion(ctx context.Context, w *versionWatch, v int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if clusterVersion(ctx, w) >= v {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no node reported cluster version %d within %s", v, limit)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// setupFeatures creates the fill tier (a plain token bucket, fine at any
// cluster version) and, if windows, the window tier (which waits for
// cluster version 2), and assigns their keys. It returns the changes made.
func setupFeatures(ctx context.Context, api *apiClient, versions *versionWatch, windows bool) ([]history.Policy, error) {
	var out []history.Policy
	p, err := api.setTier(ctx, FillTier, FillCapacity, FillRate)
	if err != nil {
		return nil, fmt.Errorf("creating the fill tier: %w", err)
	}
	out = append(out, p)
	for i := range FillKeys {
		tier := FillTier
		if i == FillKeys-1 {
			tier = "hot"
		}
		if err := api.assign(ctx, workload.FillKey(i), tier); err != nil {
			return nil, fmt.Errorf("assigning %s: %w", workload.FillKey(i), err)
		}
	}
	if !windows {
		return out, nil
	}
	if err := waitClusterVersion(ctx, versions, minFeatureVersion, 60*time.Second); err != nil {
		return nil, fmt.Errorf("sliding windows need cluster version %d: %w", minFeatureVersion, err)
	}
	p, err = api.setPolicy(ctx, windowPolicy(WindowLimit))
	if err != nil {
		return nil, fmt.Errorf("creating the window tier: %w", err)
	}
	out = append(out, p)
	for i := range WindowKeys {
		if err := api.assign(ctx, workload.WindowKey(i), WindowTier); err != nil {
			return nil, fmt.Errorf("assigning %s: %w", workload.WindowKey(i), err)
		}
	}
	return out, nil
}

func windowPolicy(limit int64) history.Policy {
	return history.Policy{Tier: WindowTier, Algorithm: "sliding_window", Limit: limit, WindowSeconds: WindowSeconds}
}

func fillPolicy(capacity int64, onRaise string) history.Policy {
	return history.Policy{Tier: FillTier, Capacity: capacity, RatePerSec: FillRate, OnRaise: onRaise}
}

// featureSteps are the changes of the fill and window tiers during a run,
// in order: raises with fill, a lowering sent with on_raise fill (which
// fills nothing), a repeated raise to the same capacity (which fills
// nothing), a lowering that keeps, and the window's limit cut and
// restored.
func featureSteps(windows bool) []history.Policy {
	steps := []history.Policy{
		fillPolicy(FillRaised, "fill"),
		windowPolicy(WindowLimit / 2),
		fillPolicy(FillCapacity, "fill"),
		fillPolicy(FillRaised, "fill"),
		windowPolicy(WindowLimit),
		fillPolicy(FillRaised, "fill"),
		fillPolicy(FillCapacity, ""),
		fillPolicy(FillRaised, "fill"),
	}
	if windows {
		return steps
	}
	var out []history.Policy
	for _, s := range steps {
		if s.Tier != WindowTier {
			out = append(out, s)
		}
	}
	return out
}

// changeFeatures makes featureSteps one every d/(steps+1) until ctx ends,
// appending each record to *policies under mu. A change with on_raise is
// skipped while no node reports cluster version 2 (an upgrade roll not
// yet done).
func changeFeatures(ctx context.Context, api *apiClient, versions *versionWatch, windows bool, d time.Duration,
	mu *sync.Mutex, policies *[]history.Policy, log *slog.Logger) {
	steps := featureSteps(windows)
	for i, s := range steps {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d / time.Duration(len(steps)+1)):
		}
		if s.OnRaise != "" && clusterVersion(ctx, versions) < minFeatureVersion {
			log.Info("cluster version below 2: change with on_raise skipped", "step", i)
			continue
		}
		p, err := api.setPolicy(ctx, s)
		if err != nil {
			log.Warn("policy change not acknowledged", "tier", s.Tier, "step", i, "err", err)
		}
		mu.Lock()
		*policies = append(*policies, p)
		mu.Unlock()
	}
}

// featureParams adds the window and fill tiers and keys a history's
// metadata records (none in a history written before them) to tiers and
// keyTiers.
func featureParams(meta map[string]string, tiers map[string]bucket.Policy, keyTiers map[string]string) error {
	var windowKeys, fillKeys int
	fmt.Sscan(meta["window_keys"], &windowKeys)
	fmt.Sscan(meta["fill_keys"], &fillKeys)
	if windowKeys > 0 {
		pol, err := bucket.Spec{Algorithm: "sliding_window", Limit: meta["window_limit"], WindowSeconds: meta["window_seconds"]}.Parse()
		if err != nil {
			return fmt.Errorf("history metadata: window tier: %w", err)
		}
		tiers[WindowTier] = pol
		for i := range windowKeys {
			keyTiers[workload.WindowKey(i)] = WindowTier
		}
	}
	if fillKeys > 0 {
		pol, err := bucket.ParsePolicy(meta["fill_capacity"], meta["fill_rate"])
		if err != nil {
			return fmt.Errorf("history metadata: fill tier: %w", err)
		}
		tiers[FillTier] = pol
		for i := range fillKeys {
			keyTiers[workload.FillKey(i)] = FillTier
		}
		keyTiers[workload.FillKey(fillKeys-1)] = "hot" // the fill mover
	}
	return nil
}
