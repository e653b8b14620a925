package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/quorate/quorate/jepsen/history"
)

// apiClient makes the run's administrative calls through any node.
type apiClient struct {
	hc      *http.Client
	targets []string
}

func (a *apiClient) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	data, _ := json.Marshal(body)
	var lastErr error
	for attempt := range 20 {
		node := a.targets[attempt%len(a.targets)]
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, _ := http.NewRequestWithContext(cctx, method, node+path, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Quorate-Timeout-Ms", "8000")
		resp, err := a.hc.Do(req)
		if err == nil {
			var out bytes.Buffer
			_, _ = out.ReadFrom(resp.Body)
			resp.Body.Close()
			cancel()
			if resp.StatusCode == http.StatusOK {
				return out.Bytes(), nil
			}
			if resp.StatusCode == http.StatusAccepted {
				// Committed, not yet applied everywhere: not an ack, and
				// not something to send again.
				return out.Bytes(), errNotEverywhere
			}
			lastErr = fmt.Errorf("%s %s via %s: HTTP %d: %s", method, path, node, resp.StatusCode, bytes.TrimSpace(out.Bytes()))
		} else {
			cancel()
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), lastErr)
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil, lastErr
}

// errNotEverywhere is a 202: the change is committed but some groups had
// not applied it when the call returned.
var errNotEverywhere = errors.New("change committed but not applied in every group before the deadline (202)")

// setTier sets a tier's token-bucket policy and returns the record of the
// change: acked with the ack time if every group applied it (200), not
// acked otherwise.
func (a *apiClient) setTier(ctx context.Context, tier string, capacity int64, rate string) (history.Policy, error) {
	return a.setPolicy(ctx, history.Policy{Tier: tier, Capacity: capacity, RatePerSec: rate})
}

// setPolicy makes the change p describes (a token bucket, or a sliding
// window if p.Algorithm says so, with p.OnRaise if set) and returns its
// record as setTier does.
func (a *apiClient) setPolicy(ctx context.Context, p history.Policy) (history.Policy, error) {
	body := map[string]any{"capacity": p.Capacity, "refill_per_second": json.Number(p.RatePerSec)}
	if p.Algorithm != "" {
		body = map[string]any{"algorithm": p.Algorithm, "limit": p.Limit, "window_seconds": p.WindowSeconds}
	}
	if p.OnRaise != "" {
		body["on_raise"] = p.OnRaise
	}
	p.Invoke = time.Now().UnixNano()
	out, err := a.call(ctx, http.MethodPut, "/v1/tiers/"+p.Tier, body)
	p.Time = time.Now().UnixNano()
	if err != nil {
		return p, err // recorded, not acked (a 202 included)
	}
	var ans struct {
		Version uint64 `json:"version"`
	}
	_ = json.Unmarshal(out, &ans)
	p.Version, p.Acked = ans.Version, true
	return p, nil
}

// setClientTier assigns client to tier (PUT), or removes its assignment
// for tier "" (DELETE), and returns the record of it: acked with the ack
// time on a 200, not acked (Time: when the harness gave up) otherwise.
func (a *apiClient) setClientTier(ctx context.Context, client, tier string) (history.Assignment, error) {
	rec := history.Assignment{Key: client, Tier: tier, Invoke: time.Now().UnixNano()}
	var err error
	if tier == "" {
		_, err = a.call(ctx, http.MethodDelete, "/v1/clients/"+client+"/tier", nil)
	} else {
		err = a.assign(ctx, client, tier)
	}
	rec.Time = time.Now().UnixNano()
	rec.Acked = err == nil
	return rec, err
}

func (a *apiClient) assign(ctx context.Context, client, tier string) error {
	_, err := a.call(ctx, http.MethodPut, "/v1/clients/"+client+"/tier", map[string]string{"tier": tier})
	return err
}

// readBalance reads key's balance (GET /v1/clients/{key}) through any node
// and records it as an ok read of process -1.
func (a *apiClient) readBalance(ctx context.Context, key string) (history.Op, error) {
	op := history.Op{Process: -1, Key: key, Kind: history.KindRead, Invoke: time.Now().UnixNano()}
	out, err := a.call(ctx, http.MethodGet, "/v1/clients/"+key, nil)
	op.Complete = time.Now().UnixNano()
	if err != nil {
		return op, err
	}
	var ans struct {
		Tier      string `json:"tier"`
		Remaining int64  `json:"remaining"`
		Policy    struct {
			Capacity int64 `json:"capacity"`
		} `json:"policy"`
		Stamp int64 `json:"stamp_unix_nano"`
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		return op, fmt.Errorf("GET /v1/clients/%s: %w", key, err)
	}
	op.Outcome, op.Status = history.OutcomeOK, http.StatusOK
	op.Remaining, op.Limit, op.Tier, op.Stamp = ans.Remaining, ans.Policy.Capacity, ans.Tier, ans.Stamp
	return op, nil
}
