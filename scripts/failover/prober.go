package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/quorate/quorate/transport/httpapi"
)

// prober sends one peek every interval, each in its own goroutine with a
// short deadline, and keeps every outcome. It stops by itself after max.
type prober struct {
	ctx      context.Context // ends waits early on INT or TERM
	hc       *http.Client
	target   string
	body     []byte
	interval time.Duration
	limit    int
	stopAt   time.Time

	mu      sync.Mutex
	res     []probeResult
	changed chan struct{}
	quit    chan struct{}
	wg      sync.WaitGroup
}

func newProber(ctx context.Context, hc *http.Client, target, client string, interval, maxRun time.Duration) *prober {
	body, _ := json.Marshal(map[string]any{"client": client, "cost": 0})
	return &prober{
		ctx: ctx, hc: hc, target: target, body: body, interval: interval,
		limit:   int(maxRun/interval) + 1,
		stopAt:  time.Now().Add(maxRun),
		changed: make(chan struct{}, 1),
		quit:    make(chan struct{}),
	}
}

func (p *prober) start() {
	p.wg.Go(func() {
		tick := time.NewTicker(p.interval)
		defer tick.Stop()
		for n := 0; n < p.limit && time.Now().Before(p.stopAt); n++ {
			p.wg.Go(p.once)
			select {
			case <-p.quit:
				return
			case <-tick.C:
			}
		}
	})
}

// stop ends the loop and waits for the probes in flight.
func (p *prober) stop() {
	close(p.quit)
	p.wg.Wait()
}

func (p *prober) once() {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeoutMs*time.Millisecond+150*time.Millisecond)
	defer cancel()
	pr := probeResult{sent: time.Now()}
	pr.stamp, pr.kind, pr.err = p.send(ctx)
	pr.done = time.Now()
	pr.ok = pr.err == ""
	p.mu.Lock()
	p.res = append(p.res, pr)
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// send makes one probe; on failure it returns the kind of failure and its
// text.
func (p *prober) send(ctx context.Context) (stamp int64, kind, errText string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.target, bytes.NewReader(p.body))
	if err != nil {
		return 0, "transport", err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(httpapi.TimeoutHeader, strconv.Itoa(probeTimeoutMs))
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, "transport", err.Error()
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "transport", err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		var eb httpapi.ErrorBody
		kind := strconv.Itoa(resp.StatusCode)
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			kind += " " + eb.Error.Code
		}
		return 0, kind, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(data))
	}
	var out httpapi.AllowResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return 0, "transport", err.Error()
	}
	if out.StampUnixNano == 0 {
		return 0, "bad answer", "answer without stamp_unix_nano"
	}
	return out.StampUnixNano, "", ""
}

func (p *prober) results() []probeResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.res)
}

func (p *prober) firstFailure() string {
	for _, r := range p.results() {
		if !r.ok {
			return r.err
		}
	}
	return "no answer yet"
}

// wait calls cond on the results whenever they change, until it holds, d
// passes or the run is interrupted.
func (p *prober) wait(d time.Duration, cond func([]probeResult) bool) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		p.mu.Lock()
		ok := cond(p.res)
		p.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-p.changed:
		case <-p.ctx.Done():
			return false
		case <-timer.C:
			p.mu.Lock()
			defer p.mu.Unlock()
			return cond(p.res)
		}
	}
}

func (p *prober) waitSuccesses(n int, d time.Duration) bool {
	return p.wait(d, func(rs []probeResult) bool {
		c := 0
		for _, r := range rs {
			if r.ok {
				c++
			}
		}
		return c >= n
	})
}

// waitNewDecision waits for a successful probe sent after tKill and
// decided after it (so by a new leader: the old one is dead).
func (p *prober) waitNewDecision(tKill time.Time, d time.Duration) bool {
	return p.wait(d, func(rs []probeResult) bool {
		for _, r := range rs {
			if r.ok && r.sent.After(tKill) && r.stamp > tKill.UnixNano() {
				return true
			}
		}
		return false
	})
}
