// Command memattack is the memory attack of a caller with only the decide
// role, from outside (issue "Nothing from outside can exhaust a node",
// finding 1): many connections of POST /v1/allow/batch, every request a new
// 256-byte client id with a new 128-byte request id, while a legitimate
// caller decides for clients the node already holds, without request ids.
// It samples the node's resident memory from /proc and reports what the
// attacker got through, what it was refused, and whether the legitimate
// caller was still decided. Loopback targets only; bounded in time.
//
//	go run ./scripts/memattack -addr http://127.0.0.1:17070 -pid 1234 -duration 60s
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/internal/loopback"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "memattack:", err)
		os.Exit(1)
	}
}

type counts struct{ ok, shed, other atomic.Int64 }

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("memattack", flag.ContinueOnError)
	addr := fs.String("addr", "http://127.0.0.1:17070", "the node's HTTP base URL (loopback only)")
	token := fs.String("token", "", "bearer token (decide role)")
	conns := fs.Int("conns", 16, "attacking connections")
	batch := fs.Int("batch", 1000, "requests per attacking batch")
	duration := fs.Duration("duration", 60*time.Second, "how long the attack lasts (at most 10m)")
	legit := fs.Int("legit", 100, "clients of the legitimate caller")
	pid := fs.Int("pid", 0, "the node's PID, to sample its resident memory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loopback.CheckURL(*addr); err != nil {
		return err
	}
	if *duration > 10*time.Minute {
		return fmt.Errorf("-duration %v: at most 10m", *duration)
	}
	hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *conns + 4}}
	post := func(ctx context.Context, body []byte) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, *addr+"/v1/allow/batch", bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if *token != "" {
			req.Header.Set("Authorization", "Bearer "+*token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	type allow struct {
		Client    string `json:"client"`
		Cost      int    `json:"cost"`
		RequestID string `json:"request_id,omitempty"`
	}
	batchOf := func(reqs []allow) []byte {
		b, _ := json.Marshal(map[string][]allow{"requests": reqs})
		return b
	}
	// The legitimate clients exist before the attack.
	var legitReqs []allow
	for i := range *legit {
		legitReqs = append(legitReqs, allow{Client: fmt.Sprintf("legit-%d", i), Cost: 0})
	}
	legitBody := batchOf(legitReqs)
	if code, b, err := post(context.Background(), legitBody); err != nil || code != http.StatusOK {
		return fmt.Errorf("creating the legitimate clients: %d %s %v", code, b, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var attack, good counts
	var lastFailure atomic.Value // string
	var wg sync.WaitGroup
	pad := strings.Repeat("x", 256)
	var seq atomic.Int64
	for w := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := make([]allow, *batch)
			for ctx.Err() == nil {
				for i := range reqs {
					n := seq.Add(1)
					id := fmt.Sprintf("%d-%012d-", w, n)
					reqs[i] = allow{Client: id + pad[len(id):], Cost: 1,
						RequestID: fmt.Sprintf("%0128d", n)}
				}
				code, _, err := post(ctx, batchOf(reqs))
				switch {
				case err != nil && ctx.Err() != nil:
				case err == nil && code == http.StatusOK:
					attack.ok.Add(int64(len(reqs)))
				case err == nil && code == http.StatusServiceUnavailable:
					attack.shed.Add(int64(len(reqs)))
				default:
					attack.other.Add(int64(len(reqs)))
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			code, body, err := post(ctx, legitBody)
			switch {
			case err != nil && ctx.Err() != nil:
			case err == nil && code == http.StatusOK:
				good.ok.Add(1)
			case err == nil && code == http.StatusServiceUnavailable:
				good.shed.Add(1)
				lastFailure.Store(fmt.Sprintf("503 %s", body))
			default:
				good.other.Add(1)
				lastFailure.Store(fmt.Sprintf("%d %s %v", code, body, err))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	start := time.Now()
	var peak int64
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	fmt.Fprintln(out, "t_s\trss_MiB\tattack_ok\tattack_shed\tlegit_ok\tlegit_failed")
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
		}
		rss := rssOf(*pid)
		peak = max(peak, rss)
		fmt.Fprintf(out, "%.0f\t%d\t%d\t%d\t%d\t%d\n", time.Since(start).Seconds(), rss>>20, attack.ok.Load(), attack.shed.Load(),
			good.ok.Load(), good.shed.Load()+good.other.Load())
	}
	wg.Wait()
	fmt.Fprintf(out, "peak RSS %d MiB; attacker: %d decided, %d refused with 503, %d other; legitimate batches: %d decided, %d failed\n",
		peak>>20, attack.ok.Load(), attack.shed.Load(), attack.other.Load(), good.ok.Load(), good.shed.Load()+good.other.Load())
	if f, ok := lastFailure.Load().(string); ok {
		fmt.Fprintf(out, "last legitimate failure: %.300s\n", f)
	}
	return nil
}

// rssOf reads VmRSS of pid from /proc (0 if it cannot).
func rssOf(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
