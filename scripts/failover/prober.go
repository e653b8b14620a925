package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/client"
)

// prober sends one peek every interval, each in its own goroutine with a
// short deadline, and keeps every outcome. It stops by itself after max.
type prober struct {
	ctx      context.Context // ends waits early on INT or TERM
	api      *client.Node    // the node probed through
	client   string
	interval time.Duration
	limit    int
	stopAt   time.Time

	mu      sync.Mutex
	res     []probeResult
	changed chan struct{}
	quit    chan struct{}
	wg      sync.WaitGroup
}

func newProber(ctx context.Context, api *client.Node, client string, interval, maxRun time.Duration) *prober {
	return &prober{
		ctx: ctx, api: api, client: client, interval: interval,
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

// send makes one probe; on failure it returns the kind of failure (HTTP
// status and error code, or "transport") and its text.
func (p *prober) send(ctx context.Context) (stamp int64, kind, errText string) {
	out, err := p.api.Allow(ctx, p.client, 0, "")
	var ae *client.Error
	switch {
	case errors.As(err, &ae) && ae.Status != 0:
		kind = strconv.Itoa(ae.Status)
		if ae.Code != "" {
			kind += " " + string(ae.Code)
		}
		return 0, kind, err.Error()
	case err != nil:
		return 0, "transport", err.Error()
	case out.StampUnixNano == 0:
		return 0, "bad answer", "answer without stamp_unix_nano"
	}
	return out.StampUnixNano, "", ""
}

// serverTimeout sends every request with TimeoutHeader set to
// probeTimeoutMs, shorter than the client's own deadline, so that the
// server gives up first and its 503 comes back (client.Node would send
// the client's deadline).
type serverTimeout struct{ next http.RoundTripper }

func (s serverTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	req.Header.Set(api.HeaderTimeout, strconv.Itoa(probeTimeoutMs))
	return s.next.RoundTrip(req)
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
