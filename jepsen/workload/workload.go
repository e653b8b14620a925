// Package workload drives a quorate cluster through its public HTTP API the
// way the fault suite needs: seeded, concurrent, with request ids on every
// call and retries that reuse them, recording every operation as invoke →
// ok / fail / info with the harness's times and the server's answer.
package workload

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/quorate/quorate/jepsen/history"
)

// Config describes one workload run. Every loop it starts is bounded by
// Duration and MaxOps.
type Config struct {
	// Targets are the nodes' base URLs; each attempt picks one at random.
	Targets []string
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
	// Now is the harness clock (time.Now if nil).
	Now func() time.Time
}

// HotKey, ColdKey and MoverKey name the workload's client ids.
func HotKey(i int) string   { return "hot-" + strconv.Itoa(i) }
func ColdKey(i int) string  { return "cold-" + strconv.Itoa(i) }
func MoverKey(i int) string { return "mover-" + strconv.Itoa(i) }

// answer is the part of POST /v1/allow's body the workload records.
type answer struct {
	Allowed   bool   `json:"allowed"`
	Remaining int64  `json:"remaining"`
	Limit     int64  `json:"limit"`
	Tier      string `json:"tier"`
	Stamp     int64  `json:"stamp_unix_nano"`
	Duplicate bool   `json:"duplicate"`
	Error     *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// Run runs the workload until ctx ends, Duration passes or MaxOps
// operations were invoked, and returns every operation, in invoke order.
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
				switch f := rng.Float64(); {
				case f < cfg.HotFraction:
					key = HotKey(rng.IntN(max(cfg.HotKeys, 1)))
				case cfg.MoverKeys > 0 && f < cfg.HotFraction+cfg.MoverFraction:
					key = MoverKey(rng.IntN(cfg.MoverKeys))
				}
				cost := int64(1)
				if rng.IntN(10) == 0 {
					cost = int64(rng.IntN(3)) // now and then a peek or a cost of 2
				}
				op := do(ctx, cfg, rng, history.Op{Process: p, Key: key, Kind: "allow", Cost: cost,
					RequestID: fmt.Sprintf("p%d-%d", p, n)})
				mu.Lock()
				ops = append(ops, op)
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

// do performs one logical operation: an attempt, then retries with the same
// request id while the outcome is unknown, for up to RetryFor. The recorded
// interval runs from the first attempt's invoke to the last one's
// completion, which contains the one application the request id allows.
func do(ctx context.Context, cfg Config, rng *rand.Rand, op history.Op) history.Op {
	op.Invoke = cfg.Now().UnixNano()
	deadline := cfg.Now().Add(cfg.RetryFor)
	backoff := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		node := cfg.Targets[rng.IntN(len(cfg.Targets))]
		op.Node = node
		outcome, a := attemptOnce(context.WithoutCancel(ctx), cfg, node, op)
		op.Complete = cfg.Now().UnixNano()
		switch outcome {
		case "ok":
			// Request ids are unique per logical operation, so an answer
			// marked duplicate is this operation's own decision, applied by
			// an earlier attempt whose answer was lost: it is recorded as
			// the decision, with its original stamp.
			op.Outcome = "ok"
			op.Allowed, op.Remaining, op.Limit, op.Tier, op.Stamp = a.Allowed, a.Remaining, a.Limit, a.Tier, a.Stamp
			if attempt > 0 {
				op.ResolvedBy = "retry"
				if a.Duplicate {
					op.ResolvedBy = "retry (applied by an earlier attempt)"
				}
			}
			return op
		case "fail":
			if attempt == 0 {
				op.Outcome = "fail"
				return op
			}
			// A later attempt refused as bad input cannot happen for the
			// same body; keep what the earlier attempts left: unknown.
			op.Outcome = "info"
			return op
		}
		op.Outcome = "info"
		if cfg.Now().After(deadline) || ctx.Err() != nil {
			return op
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return op
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// attemptOnce sends one POST /v1/allow and classifies the answer: "ok" (a
// decision), "fail" (refused before reaching the cluster: 4xx) or "info"
// (anything else: the request may or may not have been applied).
func attemptOnce(ctx context.Context, cfg Config, node string, op history.Op) (string, answer) {
	body, _ := json.Marshal(map[string]any{"client": op.Key, "cost": op.Cost, "request_id": op.RequestID})
	ctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout+500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, node+"/v1/allow", bytes.NewReader(body))
	if err != nil {
		return "info", answer{}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Quorate-Timeout-Ms", strconv.FormatInt(cfg.OpTimeout.Milliseconds(), 10))
	resp, err := cfg.HTTP.Do(req)
	if err != nil {
		return "info", answer{}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return "info", answer{}
	}
	var a answer
	if json.Unmarshal(data, &a) != nil {
		return "info", answer{}
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return "ok", a
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return "fail", a
	}
	return "info", a
}

// Resolve asks again, with their own request ids, about the operations
// whose outcome is still unknown and that are recent enough for the cluster
// to remember their ids (invoked less than maxAge ago). An answer marked
// duplicate is the original decision: the op becomes ok. An answer that is
// not a duplicate means the original was never applied: the op becomes
// fail, and the new decision is appended as an op of its own.
func Resolve(ctx context.Context, cfg Config, ops []history.Op, maxAge time.Duration) []history.Op {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	var extra []history.Op
	for i := range ops {
		op := &ops[i]
		if op.Outcome != "info" || cfg.Now().Sub(time.Unix(0, op.Invoke)) > maxAge {
			continue
		}
		for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
			node := cfg.Targets[rng.IntN(len(cfg.Targets))]
			probe := history.Op{Process: -1, Key: op.Key, Kind: op.Kind, Cost: op.Cost, RequestID: op.RequestID, Node: node}
			probe.Invoke = cfg.Now().UnixNano()
			outcome, a := attemptOnce(ctx, cfg, node, probe)
			probe.Complete = cfg.Now().UnixNano()
			if outcome != "ok" {
				time.Sleep(100 * time.Millisecond) // the cluster is recovering; bounded by the attempt count
				continue
			}
			if a.Duplicate {
				// The entry may have committed after the original call gave
				// up, so the op's interval runs until this answer.
				op.Outcome, op.ResolvedBy = "ok", "resolve"
				op.Allowed, op.Remaining, op.Limit, op.Tier, op.Stamp = a.Allowed, a.Remaining, a.Limit, a.Tier, a.Stamp
				op.Complete = probe.Complete
			} else {
				op.Outcome, op.ResolvedBy = "fail", "resolve: never applied"
				probe.Outcome, probe.ResolvedBy = "ok", "resolve of "+op.RequestID
				probe.Allowed, probe.Remaining, probe.Limit, probe.Tier, probe.Stamp = a.Allowed, a.Remaining, a.Limit, a.Tier, a.Stamp
				extra = append(extra, probe)
			}
			break
		}
	}
	ops = append(ops, extra...)
	sortByInvoke(ops)
	return ops
}

// sortByInvoke sorts by invoke time, stably so that equal times keep
// recording order.
func sortByInvoke(ops []history.Op) {
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Invoke, b.Invoke) })
}
