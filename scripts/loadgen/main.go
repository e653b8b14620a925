// Command loadgen drives a rate limiter from many concurrent connections,
// one call at a time per connection, and reports throughput, latency
// percentiles and outcomes. One call is one decision (or, with -batch, one
// POST /v1/allow/batch of that many). It speaks to three kinds of target
// (-mode):
//
//	quorate     quorate's POST /v1/allow (or /v1/allow/batch), and the
//	            ceiling (scripts/ceiling), which serves the same API
//	client      quorate through its Go client (package client), shared by
//	            every connection: routed to each group's leader and, unless
//	            -coalesce=false, coalesced into batches
//	gubernator  gubernator v2's POST /v1/GetRateLimits, one LEAKY_BUCKET
//	            request per call: gubernator's continuously refilling bucket
//	redis       EVALSHA of a Lua token bucket (tokenbucket.lua) over RESP
//
// Every mode decides under the same policy, quorate's built-in default
// (-capacity, -rate), with the same key choice. With -pids and -metrics it
// also measures the servers: CPU time from /proc/PID/stat and quorate's
// group-commit and fsync counters from /metrics, before and after the load.
//
// It is bounded in both time (-duration) and count (-requests) and refuses
// targets outside the loopback range. "loadgen report" turns the -json
// results of several runs into one table (see report.go).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/internal/loopback"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// result is one run's outcome, printed by -json and read by "loadgen report".
type result struct {
	Label        string   `json:"label,omitempty"`
	Mode         string   `json:"mode"`
	Targets      []string `json:"targets"`
	Connections  int      `json:"connections"`
	Keys         int      `json:"keys"`
	Batch        int      `json:"batch"`
	Calls        int64    `json:"calls"`
	Requests     int64    `json:"requests"` // decisions asked for, failed calls included
	Allowed      int64    `json:"allowed"`
	Denied       int64    `json:"denied"`
	Errors       int64    `json:"errors"` // failed calls
	Seconds      float64  `json:"seconds"`
	PerSecond    float64  `json:"per_second"` // decisions answered per second
	P50Micros    int64    `json:"p50_us"`     // latency of one call
	P90Micros    int64    `json:"p90_us"`
	P99Micros    int64    `json:"p99_us"`
	MaxMicros    int64    `json:"max_us"`
	FirstErrText string   `json:"first_error,omitempty"`
	serverStats
	Ledger *ledger `json:"ledger,omitempty"`
}

// config is what a run needs besides the flags that only run reads.
type config struct {
	mode      string
	targets   []string
	conns     int
	batch     int
	policy    bucket.Policy
	keys      []string
	maxReq    int64
	seed      uint64
	duration  time.Duration
	probePIDs []int
	probeURLs []string
	// token is sent as a bearer token to quorate targets and /metrics.
	token string
	// coalesce lets the Go client (mode client) coalesce decisions.
	coalesce bool
	// inflight is the client's MaxInflight (mode client; 0: its default).
	inflight int
	// requestIDs gives every decision of mode quorate its own request id.
	requestIDs bool
	// each asks for every key once, in order, instead of at random.
	each bool
	// ledgerURLs are the nodes' debug listeners, one per probePIDs entry,
	// for the cost ledger (ledger.go).
	ledgerURLs []string
}

func run(args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "report" {
		return runReport(args[1:], stdout)
	}
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	mode := fs.String("mode", "quorate", "target kind: quorate (also the ceiling), client (quorate through the Go client), envoy (quorate's Envoy rate-limit service over gRPC; -targets grpc://host:port; -batch descriptors per call), gubernator or redis")
	targets := fs.String("targets", "http://127.0.0.1:7070", "comma-separated base URLs (loopback only; redis://host:port for redis); connections are spread over them")
	conns := fs.Int("c", 64, "concurrent connections")
	duration := fs.Duration("duration", 20*time.Second, "how long to run (at most 10m)")
	maxReq := fs.Int64("requests", 5_000_000, "stop after asking for this many decisions")
	keys := fs.Int("keys", 10000, "distinct client ids, chosen uniformly (1: a single hot key)")
	each := fs.Bool("each", false, "ask for every key exactly once, in order, then stop (fills a node with -keys clients; -requests is ignored)")
	batch := fs.Int("batch", 1, "decisions per call; above 1 uses POST /v1/allow/batch (quorate mode), or as many descriptors (envoy mode)")
	prefix := fs.String("prefix", "load", "client id prefix (letters, digits, '.', '_', '-')")
	capacity := fs.Int64("capacity", bucket.BuiltinDefault.Capacity, "bucket capacity for gubernator and redis (quorate uses its own policy)")
	rate := fs.String("rate", bucket.BuiltinDefault.RateString(), "refill in tokens per second for gubernator and redis")
	pids := fs.String("pids", "", "comma-separated server PIDs whose CPU time (utime+stime) is measured over the run")
	metrics := fs.String("metrics", "", "comma-separated base URLs whose /metrics are read before and after the run (quorate's raft and fsync counters)")
	label := fs.String("label", "", "name of the target in the JSON result and the report")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	seed := fs.Uint64("seed", 1, "random seed for key choice")
	coalesce := fs.Bool("coalesce", true, "mode client: let the client send concurrent decisions bound for one node as one batch")
	inflight := fs.Int("inflight", 0, "mode client: coalesced calls outstanding per node before decisions wait to travel together (the client's MaxInflight; 0: its default)")
	requestIDs := fs.Bool("request-ids", false, "mode quorate: give every decision a request id of its own (what the group remembers for two minutes)")
	ledgerURLs := fs.String("ledger", "", "comma-separated debug listener URLs of the nodes (--debug-addr), one per -pids entry in the same order: profile them over the middle half of the run and report the cost ledger, CPU per decision by stage")
	cpuProfile := fs.String("cpuprofile", "", "write the load generator's own CPU profile over the run to this file (what the caller's side costs, as in the client rows)")
	token := fs.String("token", os.Getenv("QUORATE_TOKEN"), "quorate API token (decide role; read for -metrics), sent as a bearer token; default $QUORATE_TOKEN")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *duration <= 0 || *duration > 10*time.Minute {
		return errors.New("-duration must be in (0, 10m]")
	}
	if *conns < 1 || *conns > 4096 || *keys < 1 || *keys > 10_000_000 {
		return errors.New("-c must be 1..4096 and -keys 1..10,000,000")
	}
	if *batch < 1 || *batch > 1000 || (*batch > 1 && *mode != "quorate" && *mode != "envoy") {
		return errors.New("-batch must be 1..1000, and above 1 only in quorate and envoy modes")
	}
	if *inflight < 0 || (*inflight > 0 && *mode != "client") {
		return errors.New("-inflight must be 0 or more, and is for mode client only")
	}
	if *mode == "client" && *batch > 1 {
		return errors.New("-mode client decides one request per call: the client batches by itself")
	}
	if !prefixRE.MatchString(*prefix) {
		return fmt.Errorf("-prefix %q: use letters, digits, '.', '_' and '-'", *prefix)
	}
	r, err := bucket.ParseRate(*rate)
	if err != nil {
		return fmt.Errorf("-rate: %w", err)
	}
	policy := bucket.Policy{Capacity: *capacity, Rate: r}
	if err := policy.Validate(); err != nil {
		return err
	}
	if policy.Rate == 0 {
		return errors.New("-rate must be above 0")
	}
	cfg := config{
		mode: *mode, targets: splitList(*targets), conns: *conns, batch: *batch, policy: policy,
		maxReq: *maxReq, seed: *seed, duration: *duration, probeURLs: splitList(*metrics), token: *token, coalesce: *coalesce, inflight: *inflight, requestIDs: *requestIDs,
		each: *each, ledgerURLs: splitList(*ledgerURLs),
	}
	if *each {
		if *keys%*batch != 0 {
			return errors.New("-each needs -keys to be a multiple of -batch")
		}
		cfg.maxReq = int64(*keys)
	}
	for i := range *keys {
		cfg.keys = append(cfg.keys, *prefix+"-"+strconv.Itoa(i))
	}
	for _, p := range splitList(*pids) {
		pid, err := strconv.Atoi(p)
		if err != nil || pid <= 0 {
			return fmt.Errorf("-pids: %q is not a process id", p)
		}
		cfg.probePIDs = append(cfg.probePIDs, pid)
	}
	if len(cfg.targets) == 0 {
		return errors.New("-targets is empty")
	}
	if len(cfg.ledgerURLs) > 0 && len(cfg.ledgerURLs) != len(cfg.probePIDs) {
		return errors.New("-ledger needs one debug URL per -pids entry, in the same order")
	}
	if len(cfg.ledgerURLs) > 0 && (cfg.duration < 2*time.Second || cfg.each) {
		return errors.New("-ledger profiles the middle half of a run: it needs -duration of at least 2s, and no -each")
	}
	for _, u := range slices.Concat(cfg.targets, cfg.probeURLs, cfg.ledgerURLs) {
		if err := loopback.CheckURL(u); err != nil {
			return fmt.Errorf("target %w; loadgen only drives local servers", err)
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	res, err := load(cfg)
	if err != nil {
		return err
	}
	res.Label = *label
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printResult(stdout, res)
	return nil
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// caller makes one call at a time on its own connection: it asks for one
// decision per key and reports how many were allowed.
type caller interface {
	call(ctx context.Context, keys []string) (allowed int, err error)
	close()
}

// load runs cfg.conns callers until the duration ends or cfg.maxReq
// decisions were asked for, measuring the servers around it.
func load(cfg config) (result, error) {
	newCaller, cleanup, err := callerFactory(cfg)
	if err != nil {
		return result{}, err
	}
	defer cleanup()
	callers := make([]caller, cfg.conns)
	for w := range callers {
		c, err := newCaller(cfg.targets[w%len(cfg.targets)])
		if err != nil {
			for _, c := range callers[:w] {
				c.close()
			}
			return result{}, err
		}
		callers[w] = c
	}
	defer func() {
		for _, c := range callers {
			c.close()
		}
	}()

	before, err := probe(cfg.probePIDs, cfg.probeURLs, cfg.token)
	if err != nil {
		return result{}, fmt.Errorf("before the run: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()
	end, _ := ctx.Deadline()
	// over reports that the run has ended; a call that fails then was cut
	// off (a connection deadline can fire just before ctx's timer).
	over := func() bool { return ctx.Err() != nil || !time.Now().Before(end) }
	var (
		sent, allowed, denied, failed, calls atomic.Int64
		firstErr                             atomic.Value
		wg                                   sync.WaitGroup
		lat                                  = make([][]time.Duration, cfg.conns)
	)
	start := time.Now()
	ledgerDone := make(chan ledgerResult, 1)
	if len(cfg.ledgerURLs) > 0 {
		lp := ledgerProbe{urls: cfg.ledgerURLs, pids: cfg.probePIDs, token: cfg.token, metrics: cfg.probeURLs, hc: &http.Client{}}
		go func() {
			l, err := lp.run(ctx, cfg.duration/4, cfg.duration/2, func() int64 { return allowed.Load() + denied.Load() })
			ledgerDone <- ledgerResult{l, err}
		}()
	}
	for w, c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.seed, uint64(w)))
			picked := make([]string, cfg.batch)
			mine := make([]time.Duration, 0, 1<<14)
			for !over() {
				upTo := sent.Add(int64(cfg.batch))
				if upTo > cfg.maxReq {
					break
				}
				for i := range picked {
					if cfg.each {
						picked[i] = cfg.keys[(upTo-int64(cfg.batch)+int64(i))%int64(len(cfg.keys))]
					} else {
						picked[i] = cfg.keys[rng.IntN(len(cfg.keys))]
					}
				}
				t0 := time.Now()
				ok, err := c.call(ctx, picked)
				d := time.Since(t0)
				if err != nil {
					if over() {
						sent.Add(-int64(cfg.batch)) // cut off by the end of the run
						break
					}
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				calls.Add(1)
				allowed.Add(int64(ok))
				denied.Add(int64(cfg.batch - ok))
				mine = append(mine, d)
			}
			lat[w] = mine
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var led *ledger
	if len(cfg.ledgerURLs) > 0 {
		r := <-ledgerDone
		if r.err != nil {
			return result{}, fmt.Errorf("cost ledger: %w", r.err)
		}
		led = r.l
	}
	after, err := probe(cfg.probePIDs, cfg.probeURLs, cfg.token)
	if err != nil {
		return result{}, fmt.Errorf("after the run: %w", err)
	}

	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) int64 {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()
	}
	res := result{
		Mode: cfg.mode, Targets: cfg.targets, Connections: cfg.conns, Keys: len(cfg.keys), Batch: cfg.batch,
		Calls: calls.Load(), Allowed: allowed.Load(), Denied: denied.Load(), Errors: failed.Load(),
		Seconds:   elapsed.Seconds(),
		P50Micros: pct(0.50), P90Micros: pct(0.90), P99Micros: pct(0.99),
	}
	res.Requests = res.Allowed + res.Denied + res.Errors*int64(cfg.batch)
	res.PerSecond = float64(res.Allowed+res.Denied) / elapsed.Seconds()
	if len(all) > 0 {
		res.MaxMicros = all[len(all)-1].Microseconds()
	}
	if e, ok := firstErr.Load().(string); ok {
		res.FirstErrText = e
	}
	res.serverStats = delta(before, after, res.Allowed+res.Denied)
	res.Ledger = led
	return res, nil
}

func printResult(w io.Writer, res result) {
	fmt.Fprintf(w, "mode=%s targets=%s connections=%d keys=%d batch=%d\n", res.Mode, strings.Join(res.Targets, ","), res.Connections, res.Keys, res.Batch)
	fmt.Fprintf(w, "calls=%d decisions=%d allowed=%d denied=%d failed calls=%d in %.1fs\n", res.Calls, res.Allowed+res.Denied, res.Allowed, res.Denied, res.Errors, res.Seconds)
	fmt.Fprintf(w, "throughput=%.0f decisions/s  latency per call p50=%dµs p90=%dµs p99=%dµs max=%dµs\n", res.PerSecond, res.P50Micros, res.P90Micros, res.P99Micros, res.MaxMicros)
	if res.CPUMicrosPerDecision != nil || res.DecisionsPerEntry != nil || res.DecisionsPerSync != nil {
		fmt.Fprintf(w, "server CPU per decision=%sµs  decisions per raft entry=%s  decisions per fsync=%s\n",
			fmtOpt(res.CPUMicrosPerDecision, 1), fmtOpt(res.DecisionsPerEntry, 1), fmtOpt(res.DecisionsPerSync, 1))
	}
	if res.FirstErrText != "" {
		fmt.Fprintf(w, "first error: %s\n", res.FirstErrText)
	}
	if res.Ledger != nil {
		writeLedger(w, cmp.Or(res.Label, res.Mode), res.Ledger)
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
