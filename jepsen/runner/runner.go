// Package runner runs one fault-injection test of quorate end to end: it
// builds the binary with the test-only tags, starts a cluster in network
// namespaces (jepsen/control), drives it with a seeded workload
// (jepsen/workload) while nemeses break it and policies change, heals it,
// resolves unknown outcomes, checks the history (jepsen/checker) and writes
// a results folder.
package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/jepsen/checker"
	"github.com/quorate/quorate/jepsen/control"
	"github.com/quorate/quorate/jepsen/history"
	"github.com/quorate/quorate/jepsen/workload"
)

// Mover keys: workload.MoverKey(0..MoverKeys-1) start in tier "hot" and
// are moved between "hot" and the default every Duration/5 during the run,
// with MoverFraction of the operations.
const (
	MoverKeys     = 3
	MoverFraction = 0.05
)

// Accounting keys: workload.AccountKey(0..Config.AccountKeys-1) are in
// tier "acct" (AccountCapacity tokens that never refill) and get
// AccountFraction of the operations, without request ids; after the run
// their balances are read for the accounting check. RepeatFraction of the
// other operations answered ok are sent again, to be answered as
// duplicates.
const (
	AccountTier     = "acct"
	AccountCapacity = 1_000_000
	AccountFraction = 0.1
	RepeatFraction  = 0.02
)

// Config is one run.
type Config struct {
	Name     string        // mix name, used in the results folder
	Nodes    int           // 3 or 5
	Duration time.Duration // how long faults and load last
	Nemeses  []string      // control.Mix names
	Interval time.Duration // between a nemesis's start and stop, and between rounds
	Seed     uint64
	Out      string // results root; the run writes Out/<name>-<seed>
	Unsafe   bool   // build the negative control (tag unsafe_decide)
	Groups   int
	// RaftTimeout is passed to every node (--raft-timeout).
	RaftTimeout time.Duration
	Workers     int
	HotKeys     int
	ColdKeys    int
	// HotCapacity and HotRate are the "hot" tier's first policy; the policy
	// nemesis moves between it, a raise and a cut.
	HotCapacity int64
	HotRate     string
	// PolicyChanges makes the run raise and cut the hot tier during faults.
	PolicyChanges bool
	// AccountKeys is how many accounting keys the workload uses (0: none).
	AccountKeys int
	// Ambiguous503 is passed to the workload (see workload.Config): 503
	// codes recorded as unknown outcomes rather than "nothing decided".
	Ambiguous503 []string
	UseNetns     bool
	Prefix       string
	Logger       *slog.Logger
	// Repo is the module root to build from.
	Repo string
	// UpgradeFrom, if set, is a git revision of Repo: every node starts on
	// its binary, and the upgrade-roll nemesis moves them one at a time to
	// the working tree's. The run then also checks that the cluster version
	// moved up only after the last node (checkUpgrade).
	UpgradeFrom string
	// NodeArgs are added to every node's serve command line, e.g.
	// "--max-clock-offset=-1" to switch the clock guard off and see the
	// checkers catch what it prevents.
	NodeArgs []string
}

// Summary is what a run reports.
type Summary struct {
	Name    string   `json:"name"`
	Dir     string   `json:"dir"`
	Seed    uint64   `json:"seed"`
	Nodes   int      `json:"nodes"`
	Nemeses []string `json:"nemeses"`
	Unsafe  bool     `json:"unsafe"`
	Netns   bool     `json:"netns"`
	// Ops counts logical operations (the attempts of one request id are one
	// operation) and Attempts the requests sent. OK operations got a
	// decision, Info ones stayed unknown (InfoFraction of Ops, the unknown
	// rate), Fail ones were never applied, on the server's word.
	Ops          int     `json:"ops"`
	Attempts     int     `json:"attempts"`
	OK           int     `json:"ok"`
	Info         int     `json:"info"`
	Fail         int     `json:"fail"`
	InfoFraction float64 `json:"info_fraction"`
	Faults       int     `json:"faults"`
	// Latency of operations (first attempt to answer, retries included)
	// that overlapped a fault and of those that did not, in milliseconds,
	// and the share of operations that needed a retry.
	FaultLatency Latency           `json:"fault_latency_ms"`
	QuietLatency Latency           `json:"quiet_latency_ms"`
	Valid        bool              `json:"valid"`
	Results      []checker.Result  `json:"results"`
	Meta         map[string]string `json:"meta"`
}

// Run performs one test. An error means the test could not run; a run that
// ran but found violations returns a Summary with Valid false.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := cfg.Name
	if cfg.Unsafe {
		name += "-unsafe"
	}
	dir, err := filepath.Abs(filepath.Join(cfg.Out, fmt.Sprintf("%s-n%d-%d", name, cfg.Nodes, cfg.Seed)))
	if err != nil {
		return Summary{}, err
	}
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Summary{}, err
	}
	sum := Summary{Name: name, Dir: dir, Seed: cfg.Seed, Nodes: cfg.Nodes, Nemeses: cfg.Nemeses, Unsafe: cfg.Unsafe}

	bin := filepath.Join(dir, "bin", "quorate")
	tags := "faultinject"
	if cfg.Unsafe {
		tags += ",unsafe_decide"
	}
	build := exec.CommandContext(ctx, "go", "build", "-tags", tags, "-o", bin, "./cmd/quorate")
	build.Dir = cfg.Repo
	if out, err := build.CombinedOutput(); err != nil {
		return sum, fmt.Errorf("build: %w\n%s", err, out)
	}

	first, upgradeTo := bin, ""
	if cfg.UpgradeFrom != "" {
		first, upgradeTo = filepath.Join(dir, "bin", "quorate-"+cfg.UpgradeFrom), bin
		if err := buildRelease(ctx, cfg.Repo, cfg.UpgradeFrom, filepath.Join(dir, "release"), first); err != nil {
			return sum, err
		}
	}

	extra := []string{"--groups", fmt.Sprint(cfg.Groups), "--raft-timeout", cfg.RaftTimeout.String(), "--log-level", "info"}
	extra = append(extra, cfg.NodeArgs...)
	c, err := control.New(control.Options{
		Nodes: cfg.Nodes, Binary: first, UpgradeBinary: upgradeTo, WorkDir: filepath.Join(dir, "nodes"), Prefix: cfg.Prefix,
		ExtraArgs: extra, Logger: log, UseNetns: cfg.UseNetns,
	})
	if err != nil {
		return sum, err
	}
	if _, err := control.CleanupStale(ctx, cfg.Prefix); err != nil {
		log.Warn("cleaning up an earlier run", "err", err)
	}
	if err := c.Setup(ctx); err != nil {
		return sum, err
	}
	defer func() {
		tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Teardown(tctx); err != nil {
			log.Error("teardown", "err", err)
		}
	}()
	sum.Netns = c.UsesNetns()
	if err := c.StartAll(ctx); err != nil {
		return sum, err
	}
	readyCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	err = c.WaitReady(readyCtx)
	cancel()
	if err != nil {
		return sum, fmt.Errorf("cluster never became ready: %w", err)
	}

	var targets []string
	for i := 1; i <= cfg.Nodes; i++ {
		targets = append(targets, c.NodeURL(i))
	}
	api := &apiClient{hc: c.HTTPClient(), targets: targets}
	hotPolicy, err := parsePolicy(cfg.HotCapacity, cfg.HotRate)
	if err != nil {
		return sum, err
	}
	var policies []history.Policy
	p, err := api.setTier(ctx, "hot", cfg.HotCapacity, cfg.HotRate)
	if err != nil {
		return sum, fmt.Errorf("creating the hot tier: %w", err)
	}
	policies = append(policies, p)
	for i := range cfg.HotKeys {
		if err := api.assign(ctx, workload.HotKey(i), "hot"); err != nil {
			return sum, fmt.Errorf("assigning %s: %w", workload.HotKey(i), err)
		}
	}
	for i := range MoverKeys {
		if err := api.assign(ctx, workload.MoverKey(i), "hot"); err != nil {
			return sum, fmt.Errorf("assigning %s: %w", workload.MoverKey(i), err)
		}
	}
	_ = hotPolicy
	if cfg.AccountKeys > 0 {
		p, err := api.setTier(ctx, AccountTier, AccountCapacity, "0")
		if err != nil {
			return sum, fmt.Errorf("creating the accounting tier: %w", err)
		}
		policies = append(policies, p)
	}
	for i := range cfg.AccountKeys {
		if err := api.assign(ctx, workload.AccountKey(i), AccountTier); err != nil {
			return sum, fmt.Errorf("assigning %s: %w", workload.AccountKey(i), err)
		}
	}
	// Sliding windows need cluster version 2, which an upgrade roll
	// reaches only after its last node: such a run has no window keys.
	versions := &versionWatch{hc: c.HTTPClient(), targets: targets}
	windows := cfg.UpgradeFrom == ""
	featurePolicies, err := setupFeatures(ctx, api, versions, windows)
	if err != nil {
		return sum, err
	}
	policies = append(policies, featurePolicies...)
	windowKeys := 0
	if windows {
		windowKeys = WindowKeys
	}

	rng := rand.New(rand.NewPCG(cfg.Seed, 42))
	nemeses, err := c.Mix(rng, cfg.Nemeses...)
	if err != nil {
		return sum, err
	}
	wcfg := workload.Config{
		Targets: targets, HTTP: c.HTTPClient(), Seed: cfg.Seed, Workers: cfg.Workers,
		HotKeys: cfg.HotKeys, ColdKeys: cfg.ColdKeys, HotFraction: 0.7,
		MoverKeys: MoverKeys, MoverFraction: MoverFraction,
		AccountKeys: cfg.AccountKeys, AccountFraction: AccountFraction, RepeatFraction: RepeatFraction, Ambiguous503: cfg.Ambiguous503,
		WindowKeys: windowKeys, WindowFraction: WindowFraction, FillKeys: FillKeys, FillFraction: FillFraction,
		OpTimeout: time.Second, RetryFor: 20 * time.Second,
		Duration: cfg.Duration, MaxOps: 2_000_000, Think: 2 * time.Millisecond,
	}
	log.Info("run starting", "dir", dir, "seed", cfg.Seed, "nodes", cfg.Nodes, "nemeses", cfg.Nemeses, "unsafe", cfg.Unsafe, "netns", sum.Netns)

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if cfg.UpgradeFrom != "" {
		go versions.run(watchCtx, 100*time.Millisecond)
	}
	var (
		wg       sync.WaitGroup
		ops      []history.Op
		schedErr error
		polMu    sync.Mutex
		moves    []history.Assignment
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		ops = workload.Run(ctx, wcfg)
	}()
	go func() {
		defer wg.Done()
		// Faults start after a quiet second and end (a round can overrun
		// the schedule by one interval) at least five seconds before the
		// load, so the run ends with a recovery the checkers can see.
		time.Sleep(time.Second)
		schedErr = control.Schedule(ctx, nemeses, cfg.Interval, max(cfg.Duration-2*cfg.Interval-6*time.Second, cfg.Interval), rng, nil)
	}()
	if cfg.PolicyChanges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			steps := []struct {
				capacity int64
				rate     string
			}{{cfg.HotCapacity * 2, cfg.HotRate}, {max(cfg.HotCapacity/2, 1), cfg.HotRate}, {cfg.HotCapacity, cfg.HotRate}}
			for i, s := range steps {
				select {
				case <-ctx.Done():
					return
				case <-time.After(cfg.Duration / time.Duration(len(steps)+1)):
				}
				pol, err := api.setTier(ctx, "hot", s.capacity, s.rate)
				if err != nil {
					log.Warn("policy change not acknowledged", "step", i, "err", err)
				}
				polMu.Lock()
				policies = append(policies, pol)
				polMu.Unlock()
			}
		}()
		// The fill and window tiers' changes (see featureSteps).
		wg.Add(1)
		go func() {
			defer wg.Done()
			changeFeatures(ctx, api, versions, windows, cfg.Duration, &polMu, &policies, log)
		}()
	}
	// The tier nemesis: move the mover keys out of "hot" (to the default)
	// and back, and the fill mover from "hot" to "fill" and back, every
	// Duration/5, alongside the faults and policy changes.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i < 5; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(cfg.Duration / 5):
			}
			tier := "hot"
			if i%2 == 1 {
				tier = ""
			}
			for k := range MoverKeys {
				a, err := api.setClientTier(ctx, workload.MoverKey(k), tier)
				if err != nil {
					log.Warn("tier assignment not acknowledged", "key", a.Key, "tier", tier, "err", err)
				}
				moves = append(moves, a) // only this goroutine appends, read after wg.Wait
			}
			fill := FillTier
			if i%2 == 0 {
				fill = "hot"
			}
			a, err := api.setClientTier(ctx, workload.FillKey(FillKeys-1), fill)
			if err != nil {
				log.Warn("tier assignment not acknowledged", "key", a.Key, "tier", fill, "err", err)
			}
			moves = append(moves, a)
		}
	}()
	wg.Wait()
	if schedErr != nil {
		log.Warn("nemesis schedule", "err", schedErr)
	}

	// Heal everything, wait for the cluster, then learn what the unknown
	// operations did.
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Recover(rctx); err != nil {
		log.Warn("recover", "err", err)
	}
	if err := c.WaitReady(rctx); err != nil {
		log.Warn("cluster not ready after recovery", "err", err)
	}
	ops = workload.Resolve(rctx, wcfg, ops, 90*time.Second)
	var upgrade *checker.Result
	if cfg.UpgradeFrom != "" {
		sctx, cancel := context.WithTimeout(rctx, 60*time.Second)
		final, err := versions.settle(sctx)
		cancel()
		stopWatch()
		var last time.Time
		for i := 1; i <= cfg.Nodes; i++ {
			at := c.UpgradedAt(i)
			if at.IsZero() {
				last = time.Time{}
				err = fmt.Errorf("%s was never upgraded: the schedule was too short for the roll", c.NodeID(i))
				break
			}
			last = maxTime(last, at)
		}
		versions.mu.Lock()
		r := checkUpgrade(versions.obs, last, final, err)
		versions.mu.Unlock()
		upgrade = &r
	}
	// The accounting keys' final balances: every group serves again, so no
	// entry of the run can still commit.
	for i := range cfg.AccountKeys {
		op, err := api.readBalance(rctx, workload.AccountKey(i))
		if err != nil {
			log.Warn("reading a final balance", "key", op.Key, "err", err)
			continue
		}
		ops = append(ops, op)
	}

	h := history.History{
		Ops:          ops,
		Policies:     policies,
		Assignments:  moves,
		ClockOffsets: c.ClockOffsets(),
		Meta: map[string]string{
			"seed": fmt.Sprint(cfg.Seed), "nodes": fmt.Sprint(cfg.Nodes), "nemeses": strings.Join(cfg.Nemeses, ","),
			"unsafe": fmt.Sprint(cfg.Unsafe), "netns": fmt.Sprint(sum.Netns), "groups": fmt.Sprint(cfg.Groups),
			"raft_timeout": cfg.RaftTimeout.String(), "hot_capacity": fmt.Sprint(cfg.HotCapacity), "hot_rate": cfg.HotRate,
			"hot_keys": fmt.Sprint(cfg.HotKeys), "cold_keys": fmt.Sprint(cfg.ColdKeys), "mover_keys": fmt.Sprint(MoverKeys),
			"account_keys": fmt.Sprint(cfg.AccountKeys), "account_capacity": fmt.Sprint(AccountCapacity),
			"ambiguous_503": strings.Join(cfg.Ambiguous503, ","), "upgrade_from": cfg.UpgradeFrom, "node_args": strings.Join(cfg.NodeArgs, " "),
			"window_keys": fmt.Sprint(windowKeys), "window_limit": fmt.Sprint(WindowLimit), "window_seconds": fmt.Sprint(WindowSeconds),
			"fill_keys": fmt.Sprint(FillKeys), "fill_capacity": fmt.Sprint(FillCapacity), "fill_rate": FillRate,
		},
	}
	var urls []string
	for i := 1; i <= cfg.Nodes; i++ {
		urls = append(urls, c.NodeID(i)+"="+c.NodeURL(i))
	}
	h.Meta["node_urls"] = strings.Join(urls, ",")
	for _, e := range c.Events() {
		h.Events = append(h.Events, history.Event{Time: e.Time, Kind: history.KindNemesis, Name: e.Name, Phase: e.Phase, Detail: e.Detail})
	}
	if err := h.Write(filepath.Join(dir, "history")); err != nil {
		return sum, err
	}

	params, err := ParamsFor(h)
	if err != nil {
		return sum, err
	}
	results := checker.CheckAll(h, params)
	if upgrade != nil {
		results = append(results, *upgrade)
	}
	sum.Results = results
	sum.Valid = checker.Valid(results)
	sum.Meta = h.Meta
	sum.count(h)
	for _, r := range results {
		if r.Visualization != nil {
			r.Visualization.Annotate(h.NemesisIntervals())
			if _, err := r.Visualization.WriteHTML(filepath.Join(dir, "linearizability")); err != nil {
				log.Warn("porcupine visualization", "err", err)
			}
		}
	}
	if err := writePlots(filepath.Join(dir, "plots"), h, params, cfg.HotKeys); err != nil {
		log.Warn("plots", "err", err)
	}
	data, _ := json.MarshalIndent(sum, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(data, '\n'), 0o644); err != nil {
		return sum, err
	}
	return sum, nil
}

// ParamsFor derives the checkers' parameters from a recorded history: the
// hot keys are in tier "hot" with the policy in its metadata, the mover keys
// start in "hot" (their moves are h.Assignments), the accounting keys are
// in tier "acct" (rate 0) and checked by Accounting, every other key uses
// the built-in default.
func ParamsFor(h history.History) (checker.Params, error) {
	var hotCap int64
	if _, err := fmt.Sscan(h.Meta["hot_capacity"], &hotCap); err != nil {
		return checker.Params{}, fmt.Errorf("history metadata: hot_capacity: %w", err)
	}
	hot, err := parsePolicy(hotCap, h.Meta["hot_rate"])
	if err != nil {
		return checker.Params{}, fmt.Errorf("history metadata: %w", err)
	}
	var hotKeys, coldKeys, moverKeys, accountKeys int
	fmt.Sscan(h.Meta["hot_keys"], &hotKeys)
	fmt.Sscan(h.Meta["cold_keys"], &coldKeys)
	fmt.Sscan(h.Meta["mover_keys"], &moverKeys)
	keyTiers := map[string]string{}
	for i := range hotKeys {
		keyTiers[workload.HotKey(i)] = "hot"
	}
	for i := range coldKeys {
		keyTiers[workload.ColdKey(i)] = bucket.DefaultTierName
	}
	for i := range moverKeys {
		keyTiers[workload.MoverKey(i)] = "hot"
	}
	tiers := map[string]bucket.Policy{"hot": hot}
	var accounts []string
	if _, err := fmt.Sscan(h.Meta["account_keys"], &accountKeys); err == nil && accountKeys > 0 {
		var capacity int64
		if _, err := fmt.Sscan(h.Meta["account_capacity"], &capacity); err != nil {
			return checker.Params{}, fmt.Errorf("history metadata: account_capacity: %w", err)
		}
		tiers[AccountTier] = bucket.Policy{Capacity: capacity}
		for i := range accountKeys {
			keyTiers[workload.AccountKey(i)] = AccountTier
			accounts = append(accounts, workload.AccountKey(i))
		}
	}
	if err := featureParams(h.Meta, tiers, keyTiers); err != nil {
		return checker.Params{}, err
	}
	return checker.Params{Default: bucket.BuiltinDefault, Tiers: tiers, KeyTiers: keyTiers, AccountKeys: accounts, NodeIDs: nodeIDs(h.Meta)}, nil
}

// nodeIDs maps each node's URL to its id, from the history's "node_urls"
// ("n1=http://...,n2=..."), or for a history written before it was
// recorded, from the addresses jepsen/control gives node i (10.77.0.1i
// with namespaces, 127.0.0.1i without, port 7070).
func nodeIDs(meta map[string]string) map[string]string {
	out := map[string]string{}
	if v := meta["node_urls"]; v != "" {
		for _, kv := range strings.Split(v, ",") {
			if id, url, ok := strings.Cut(kv, "="); ok {
				out[url] = id
			}
		}
		return out
	}
	var nodes int
	if _, err := fmt.Sscan(meta["nodes"], &nodes); err != nil {
		return nil
	}
	for i := 1; i <= nodes; i++ {
		for _, ip := range []string{"10.77.0.%d", "127.0.0.%d"} {
			out[fmt.Sprintf("http://"+ip+":%d", 10+i, control.HTTPPort)] = fmt.Sprintf("n%d", i)
		}
	}
	return out
}

// Recheck runs the checkers again on a results folder written by Run (for
// example after a checker changed) and summarizes it as Run would.
func Recheck(dir string) (Summary, error) {
	h, err := history.Read(filepath.Join(dir, "history"))
	if err != nil {
		return Summary{}, err
	}
	p, err := ParamsFor(h)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Name: "recheck", Dir: dir, Meta: h.Meta, Netns: h.Meta["netns"] == "true", Unsafe: h.Meta["unsafe"] == "true"}
	fmt.Sscan(h.Meta["seed"], &sum.Seed)
	fmt.Sscan(h.Meta["nodes"], &sum.Nodes)
	sum.Nemeses = strings.Split(h.Meta["nemeses"], ",")
	sum.Results = checker.CheckAll(h, p)
	sum.Valid = checker.Valid(sum.Results)
	sum.count(h)
	return sum, nil
}

// count fills the operation, fault and latency figures from h.
func (sum *Summary) count(h history.History) {
	sum.OK, sum.Info, sum.Fail, sum.Faults = 0, 0, 0, 0
	for _, o := range h.Operations() {
		switch h.Settled(o) {
		case history.OutcomeOK:
			sum.OK++
		case history.OutcomeInfo:
			sum.Info++
		case history.OutcomeFail:
			sum.Fail++
		}
	}
	sum.Ops, sum.Attempts = sum.OK+sum.Info+sum.Fail, len(h.Ops)
	if sum.Ops > 0 {
		sum.InfoFraction = float64(sum.Info) / float64(sum.Ops)
	}
	for _, e := range h.Events {
		if e.Phase == history.PhaseStart {
			sum.Faults++
		}
	}
	sum.FaultLatency, sum.QuietLatency = latencies(h)
}

func parsePolicy(capacity int64, rate string) (bucket.Policy, error) {
	r, err := bucket.ParseRate(rate)
	if err != nil {
		return bucket.Policy{}, err
	}
	p := bucket.Policy{Capacity: capacity, Rate: r}
	return p, p.Validate()
}
