// Command loadgen drives quorate's POST /v1/allow from many concurrent
// keep-alive connections and reports throughput, latency percentiles and
// outcomes. It is bounded in both time (-duration) and count (-requests)
// and refuses targets outside the loopback range.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

type result struct {
	Targets      []string `json:"targets"`
	Connections  int      `json:"connections"`
	Keys         int      `json:"keys"`
	Requests     int64    `json:"requests"`
	Allowed      int64    `json:"allowed"`
	Denied       int64    `json:"denied"`
	Errors       int64    `json:"errors"`
	Seconds      float64  `json:"seconds"`
	PerSecond    float64  `json:"per_second"`
	P50Micros    int64    `json:"p50_us"`
	P90Micros    int64    `json:"p90_us"`
	P99Micros    int64    `json:"p99_us"`
	MaxMicros    int64    `json:"max_us"`
	FirstErrText string   `json:"first_error,omitempty"`
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	targets := fs.String("targets", "http://127.0.0.1:7070", "comma-separated base URLs (loopback only); connections are spread over them")
	conns := fs.Int("c", 64, "concurrent connections")
	duration := fs.Duration("duration", 20*time.Second, "how long to run (at most 10m)")
	maxReq := fs.Int64("requests", 5_000_000, "stop after this many requests")
	keys := fs.Int("keys", 10000, "distinct client ids")
	prefix := fs.String("prefix", "load", "client id prefix")
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	seed := fs.Uint64("seed", 1, "random seed for key choice")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *duration <= 0 || *duration > 10*time.Minute {
		return errors.New("-duration must be in (0, 10m]")
	}
	if *conns < 1 || *conns > 4096 || *keys < 1 {
		return errors.New("-c must be 1..4096 and -keys at least 1")
	}
	urls := strings.Split(*targets, ",")
	for _, u := range urls {
		if err := checkLoopback(u); err != nil {
			return err
		}
	}

	tr := &http.Transport{MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()

	var (
		sent, allowed, denied, failed atomic.Int64
		firstErr                      atomic.Value
		wg                            sync.WaitGroup
		lat                           = make([][]time.Duration, *conns)
	)
	start := time.Now()
	for w := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(*seed, uint64(w)))
			target := strings.TrimRight(urls[w%len(urls)], "/") + "/v1/allow"
			mine := make([]time.Duration, 0, 1<<16)
			for ctx.Err() == nil && sent.Add(1) <= *maxReq {
				body := fmt.Sprintf(`{"client":"%s-%d"}`, *prefix, rng.IntN(*keys))
				t0 := time.Now()
				ok, err := allowOnce(ctx, hc, target, body)
				d := time.Since(t0)
				switch {
				case err != nil:
					if ctx.Err() != nil {
						sent.Add(-1)
						break
					}
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				case ok:
					allowed.Add(1)
					mine = append(mine, d)
				default:
					denied.Add(1)
					mine = append(mine, d)
				}
			}
			lat[w] = mine
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) int64 {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()
	}
	res := result{
		Targets: urls, Connections: *conns, Keys: *keys,
		Allowed: allowed.Load(), Denied: denied.Load(), Errors: failed.Load(),
		Seconds:   elapsed.Seconds(),
		P50Micros: pct(0.50), P90Micros: pct(0.90), P99Micros: pct(0.99),
	}
	res.Requests = res.Allowed + res.Denied + res.Errors
	res.PerSecond = float64(res.Allowed+res.Denied) / elapsed.Seconds()
	if len(all) > 0 {
		res.MaxMicros = all[len(all)-1].Microseconds()
	}
	if e, ok := firstErr.Load().(string); ok {
		res.FirstErrText = e
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(stdout, "targets=%s connections=%d keys=%d\n", strings.Join(urls, ","), res.Connections, res.Keys)
	fmt.Fprintf(stdout, "requests=%d allowed=%d denied=%d errors=%d in %.1fs\n", res.Requests, res.Allowed, res.Denied, res.Errors, res.Seconds)
	fmt.Fprintf(stdout, "throughput=%.0f decisions/s  latency p50=%dµs p90=%dµs p99=%dµs max=%dµs\n", res.PerSecond, res.P50Micros, res.P90Micros, res.P99Micros, res.MaxMicros)
	if res.FirstErrText != "" {
		fmt.Fprintf(stdout, "first error: %s\n", res.FirstErrText)
	}
	return nil
}

func allowOnce(ctx context.Context, hc *http.Client, target, body string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewBufferString(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(data))
	}
	var out struct {
		Allowed bool `json:"allowed"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return false, err
	}
	return out.Allowed, nil
}

// checkLoopback refuses any target that is not a loopback IP address.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("target %q is not a loopback address; loadgen only drives local nodes", raw)
	}
	return nil
}
