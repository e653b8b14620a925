// Package workload drives a quorate cluster through its public HTTP API the
// way the fault suite needs: seeded, concurrent, with request ids and
// retries that reuse them (and, on the accounting keys, requests without
// one), recording every attempt as invoke → ok / fail / info with the
// harness's times and the server's raw answer. Nothing is folded: an
// operation retried three times is three records, and the checkers settle
// what they decided together.
package workload

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/jepsen/history"
)

// Config describes one workload run. Every loop it starts is bounded by
// Duration and MaxOps.
type Config struct {
	// Targets are the nodes' base URLs: the endpoints of the Go client the
	// workload drives (package client), which routes each decision to its
	// group's leader and fails over as a service's client would.
	Targets []string
	// NoCoalesce turns the client's coalescing off (client.Config.NoCoalesce).
	NoCoalesce bool
	// HTTP is the client used for every call (its transport decides which
	// network namespace connections come from).
	HTTP *http.Client
	Seed uint64
	// Workers is the number of concurrent logical clients (processes).
	Workers int
	// HotKeys are shared by many workers; ColdKeys each see little traffic.
	HotKeys, ColdKeys int
	// HotFraction is the share of operations on hot keys.
	HotFraction float64
	// MoverKeys are keys whose tier the harness changes during the run;
	// MoverFraction is the share of operations on them (taken after
	// HotFraction, so a run without movers draws the same keys).
	MoverKeys     int
	MoverFraction float64
	// OpTimeout bounds one attempt (sent to the server as its deadline too).
	OpTimeout time.Duration
	// RetryFor is how long an operation whose outcome is unknown keeps being
	// retried with the same request id. It must stay well inside the
	// cluster's dedup window (2 minutes), or a retry could be applied twice.
	RetryFor time.Duration
	// Duration and MaxOps bound the run.
	Duration time.Duration
	MaxOps   int
	// Pause between a worker's operations (0: none).
	Think time.Duration
	// RepeatFraction is the share of operations answered ok that are sent
	// once more with the same request id, whose answer must then be the
	// same decision marked duplicate (jepsen/checker's Duplicates).
	RepeatFraction float64
	// AccountKeys are keys meant for a refill-free tier, and
	// AccountFraction the share of operations on them (taken after the
	// movers'). Their requests carry no request id, so each is sent once
	// and never retried: an unknown outcome stays unknown, and the
	// accounting check (final balance against acknowledged admissions)
	// sees exactly what the server did with requests it cannot deduplicate.
	AccountKeys     int
	AccountFraction float64
	// WindowKeys are keys meant for a sliding-window tier and FillKeys
	// keys meant for a tier raised with on_raise fill; WindowFraction and
	// FillFraction are their shares of the operations (taken after the
	// accounting keys', so a run without them draws the same keys).
	WindowKeys, FillKeys         int
	WindowFraction, FillFraction float64
	// Ambiguous503 are 503 codes to record as info although the server's
	// contract says they mean "nothing was decided": for a server known to
	// answer them in ambiguous cases (before it had outcome_unknown).
	// Empty (the default): the contract is taken at its word, and a
	// checker catches every such answer that was in fact applied.
	Ambiguous503 []string
	// Now is the harness clock (time.Now if nil).
	Now func() time.Time
}

// HotKey, ColdKey and MoverKey name the workload's client ids.
func HotKey(i int) string   { return "hot-" + strconv.Itoa(i) }
func ColdKey(i int) string  { return "cold-" + strconv.Itoa(i) }
func MoverKey(i int) string { return "mover-" + strconv.Itoa(i) }

// AccountKey names the accounting keys (see Config.AccountKeys).
func AccountKey(i int) string { return "acct-" + strconv.Itoa(i) }

// WindowKey and FillKey name the window and fill keys (see
// Config.WindowKeys).
func WindowKey(i int) string { return "win-" + strconv.Itoa(i) }
func FillKey(i int) string   { return "fill-" + strconv.Itoa(i) }

// answer is the part of POST /v1/allow's body the workload records.
type answer struct {
	Allowed   bool   `json:"allowed"`
	Remaining int64  `json:"remaining"`
	Limit     int64  `json:"limit"`
	Tier      string `json:"tier"`
	Stamp     int64  `json:"stamp_unix_nano"`
	Window    int64  `json:"window_seconds"`
	Duplicate bool   `json:"duplicate"`
	Error     *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// Run runs the workload until ctx ends, Duration passes or MaxOps
// operations were invoked, and returns every attempt, in invoke order.
func Run(ctx context.Context, cfg Config) []history.Op {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var (
		mu    sync.Mutex
		ops   []history.Op
		count int
		wg    sync.WaitGroup
	)
	c, err := client.New(client.Config{
		Endpoints: cfg.Targets, HTTPClient: cfg.HTTP, NoCoalesce: cfg.NoCoalesce,
		AttemptTimeout: cfg.OpTimeout, Timeout: cfg.RetryFor, Now: cfg.Now,
	})
	if err != nil {
		panic(fmt.Sprintf("workload: %v", err)) // Targets come from the harness: a bug
	}
	defer c.Close()
	for p := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(p)+1))
			for n := 0; ctx.Err() == nil; n++ {
				mu.Lock()
				if count >= cfg.MaxOps {
					mu.Unlock()
					return
				}
				count++
				mu.Unlock()
				key := ColdKey(rng.IntN(max(cfg.ColdKeys, 1)))
				id := fmt.Sprintf("p%d-%d", p, n)
				acct := cfg.HotFraction + cfg.MoverFraction + cfg.AccountFraction
				switch f := rng.Float64(); {
				case f < cfg.HotFraction:
					key = HotKey(rng.IntN(max(cfg.HotKeys, 1)))
				case cfg.MoverKeys > 0 && f < cfg.HotFraction+cfg.MoverFraction:
					key = MoverKey(rng.IntN(cfg.MoverKeys))
				case cfg.AccountKeys > 0 && f < acct:
					key, id = AccountKey(rng.IntN(cfg.AccountKeys)), ""
				case cfg.WindowKeys > 0 && f >= acct && f < acct+cfg.WindowFraction:
					key = WindowKey(rng.IntN(cfg.WindowKeys))
				case cfg.FillKeys > 0 && f >= acct+cfg.WindowFraction && f < acct+cfg.WindowFraction+cfg.FillFraction:
					key = FillKey(rng.IntN(cfg.FillKeys))
				}
				cost := int64(1)
				if rng.IntN(10) == 0 {
					cost = int64(rng.IntN(3)) // now and then a peek or a cost of 2
				}
				attempts := do(ctx, cfg, c, rng, history.Op{Process: p, Key: key, Kind: history.KindAllow, Cost: cost, RequestID: id})
				mu.Lock()
				ops = append(ops, attempts...)
				mu.Unlock()
				if cfg.Think > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(cfg.Think):
					}
				}
			}
		}()
	}
	wg.Wait()
	sortByInvoke(ops)
	return ops
}

// do performs one logical operation and returns its attempts. An
// operation with a request id goes through the real Go client (package
// client), which routes, coalesces, fails over and retries with the same
// id for up to RetryFor; every attempt it makes is recorded through a
// client.Trace, so the checkers judge the client together with the
// cluster. After an ok answer the request is sent once more with
// probability RepeatFraction (a "repeat" probe), through the client too.
// An operation without a request id (the accounting keys) is one raw
// attempt at a random node, never retried.
func do(ctx context.Context, cfg Config, c *client.Client, rng *rand.Rand, op history.Op) []history.Op {
	if op.RequestID == "" {
		op.Node = cfg.Targets[rng.IntN(len(cfg.Targets))]
		return []history.Op{attemptOnce(context.WithoutCancel(ctx), cfg, op)}
	}
	var out []history.Op
	var mu sync.Mutex // attempts of one call end in their caller's goroutine, but say so
	record := func(probe string) *client.Trace {
		return &client.Trace{Attempt: func(node string, _ api.AllowRequest) func(client.AttemptResult) {
			a := op
			a.Node, a.Probe = node, probe
			mu.Lock()
			a.Attempt = len(out)
			mu.Unlock()
			probe = "" // only a probe's first attempt is the probe; the rest are its retries
			a.Invoke = cfg.Now().UnixNano()
			return func(r client.AttemptResult) {
				a.Complete = cfg.Now().UnixNano()
				a = recordResult(cfg, a, r)
				mu.Lock()
				out = append(out, a)
				mu.Unlock()
			}
		}}
	}
	call := func(probe string) bool {
		cctx, cancel := context.WithTimeout(ctx, cfg.RetryFor)
		defer cancel()
		cost := op.Cost
		_, _ = c.Do(client.WithTrace(cctx, record(probe)), api.AllowRequest{Client: op.Key, Cost: &cost, RequestID: op.RequestID})
		mu.Lock()
		defer mu.Unlock()
		return len(out) > 0 && out[len(out)-1].Outcome == history.OutcomeOK
	}
	if call("") && rng.Float64() < cfg.RepeatFraction {
		call("repeat")
	}
	return out
}

// recordResult fills in a's outcome and answer from the client's account
// of the attempt, classified as Classify classifies a raw answer.
func recordResult(cfg Config, a history.Op, r client.AttemptResult) history.Op {
	e := r.Err
	if e == nil {
		d := r.Response
		a.Status, a.Outcome = http.StatusOK, history.OutcomeOK
		a.Allowed, a.Remaining, a.Limit, a.Tier, a.Stamp, a.Duplicate = d.Allowed, d.Remaining, d.Limit, d.Tier, d.StampUnixNano, d.Duplicate
		a.WindowSeconds = d.WindowSeconds
		return a
	}
	a.Status = e.Status
	switch {
	case e.Status != 0 && e.Code != "":
		a.Error = string(e.Code)
	case e.Status != 0:
		a.Error = "decode"
	case e.Kind() == api.RetrySafe:
		a.Outcome, a.Error = history.OutcomeFail, "dial"
		return a
	case errors.Is(e, context.DeadlineExceeded) || errors.Is(e, context.Canceled):
		a.Outcome, a.Error = history.OutcomeInfo, "timeout"
		return a
	default:
		a.Outcome, a.Error = history.OutcomeInfo, "send"
		return a
	}
	a.Outcome = Classify(e.Status, a.Error, false)
	if e.Status == http.StatusServiceUnavailable && slices.Contains(cfg.Ambiguous503, a.Error) {
		a.Outcome = history.OutcomeInfo
	}
	return a
}

// refused reports whether the server refused the attempt as bad input.
func refused(a history.Op) bool { return a.Status >= 400 && a.Status < 500 }

// safe503 are the codes of a 503 with which the server promises that
// nothing was decided. Any other 503 code (outcome_unknown, or one this
// harness does not know) leaves the outcome unknown.
var safe503 = map[string]bool{
	"unavailable": true, "shutting_down": true, "timeout": true, "overloaded": true, "too_many_clients": true,
}

// Classify maps an answer to an outcome (see history.OutcomeOK, Fail and
// Info): 200 is ok; a 4xx, or a 503 with a code in the server's "nothing
// was decided" list, is fail; everything else (500, other 503s, a 200 whose
// body does not decode) is info.
func Classify(status int, code string, decoded bool) string {
	switch {
	case status == http.StatusOK && decoded:
		return history.OutcomeOK
	case status >= 400 && status < 500:
		return history.OutcomeFail
	case status == http.StatusServiceUnavailable && safe503[code]:
		return history.OutcomeFail
	}
	return history.OutcomeInfo
}

// attemptOnce sends one POST /v1/allow for op and returns op with its
// times, outcome and the server's raw answer filled in. A transport error
// is fail only if no connection was ever made (the request cannot have
// reached a node), and info otherwise.
func attemptOnce(ctx context.Context, cfg Config, op history.Op) history.Op {
	op.Invoke = cfg.Now().UnixNano()
	op = send(ctx, cfg, op)
	op.Complete = cfg.Now().UnixNano()
	return op
}

func send(ctx context.Context, cfg Config, op history.Op) history.Op {
	body := map[string]any{"client": op.Key, "cost": op.Cost}
	if op.RequestID != "" {
		body["request_id"] = op.RequestID
	}
	data, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout+500*time.Millisecond)
	defer cancel()
	var connected atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }})
	op.Outcome = history.OutcomeInfo
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, op.Node+"/v1/allow", bytes.NewReader(data))
	if err != nil {
		op.Outcome, op.Error = history.OutcomeFail, "request"
		return op
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Quorate-Timeout-Ms", strconv.FormatInt(cfg.OpTimeout.Milliseconds(), 10))
	resp, err := cfg.HTTP.Do(req)
	switch {
	case err != nil && !connected.Load():
		op.Outcome, op.Error = history.OutcomeFail, "dial"
		return op
	case err != nil && ctx.Err() != nil:
		op.Error = "timeout"
		return op
	case err != nil:
		op.Error = "send"
		return op
	}
	defer resp.Body.Close()
	op.Status = resp.StatusCode
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		op.Error = "read"
		if refused(op) {
			op.Outcome = history.OutcomeFail
		}
		return op
	}
	var a answer
	decoded := json.Unmarshal(raw, &a) == nil
	if a.Error != nil {
		op.Error = a.Error.Code
	} else if !decoded {
		op.Error = "decode"
	}
	op.Outcome = Classify(resp.StatusCode, op.Error, decoded)
	if resp.StatusCode == http.StatusServiceUnavailable && slices.Contains(cfg.Ambiguous503, op.Error) {
		op.Outcome = history.OutcomeInfo
	}
	if op.Outcome == history.OutcomeOK {
		op.Allowed, op.Remaining, op.Limit, op.Tier, op.Stamp, op.Duplicate = a.Allowed, a.Remaining, a.Limit, a.Tier, a.Stamp, a.Duplicate
		op.WindowSeconds = a.Window
	}
	return op
}

// Resolve learns, after the run, what happened to the requests whose
// attempts got no decision: for every request id with no ok attempt and
// some attempt that was not refused (4xx), invoked less than maxAge ago (so
// that the cluster still remembers the id), it sends the same request
// again until one attempt is answered ok (at most 20 tries). Every probe is
// recorded as one more attempt of that request (Probe "resolve"); nothing
// recorded earlier is changed. A duplicate answer says an earlier attempt
// was applied and what it decided; a fresh decision says none was, and is
// the request's decision. Operations without a request id cannot be asked
// about and stay as they are.
func Resolve(ctx context.Context, cfg Config, ops []history.Op, maxAge time.Duration) []history.Op {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	type req struct {
		first, next int  // first attempt's index in ops; next attempt number
		open        bool // no ok attempt and some attempt not refused
		decided     bool
	}
	reqs := map[[2]string]*req{}
	var order [][2]string
	for i, op := range ops {
		if op.RequestID == "" || op.Kind != history.KindAllow {
			continue
		}
		k := [2]string{op.Key, op.RequestID}
		r := reqs[k]
		if r == nil {
			r = &req{first: i}
			reqs[k] = r
			order = append(order, k)
		}
		r.next = max(r.next, op.Attempt+1)
		r.decided = r.decided || op.Outcome == history.OutcomeOK
		r.open = r.open || !refused(op)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	var probes []history.Op
	for _, k := range order {
		r := reqs[k]
		orig := ops[r.first]
		if r.decided || !r.open || cfg.Now().Sub(time.Unix(0, orig.Invoke)) > maxAge {
			continue
		}
		for try := 0; try < 20 && ctx.Err() == nil; try++ {
			probe := history.Op{Process: orig.Process, Key: orig.Key, Kind: orig.Kind, Cost: orig.Cost, RequestID: orig.RequestID,
				Node: cfg.Targets[rng.IntN(len(cfg.Targets))], Attempt: r.next, Probe: "resolve"}
			r.next++
			probe = attemptOnce(ctx, cfg, probe)
			probes = append(probes, probe)
			if probe.Outcome == history.OutcomeOK || refused(probe) {
				break
			}
			time.Sleep(100 * time.Millisecond) // the cluster is recovering; bounded by the try count
		}
	}
	ops = append(ops, probes...)
	sortByInvoke(ops)
	return ops
}

// sortByInvoke sorts by invoke time, stably so that equal times keep
// recording order.
func sortByInvoke(ops []history.Op) {
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Invoke, b.Invoke) })
}
