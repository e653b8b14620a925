package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/quorate/quorate/client"
)

func main() {
	inflight := flag.Int("inflight", 2, "")
	window := flag.Duration("window", 0, "")
	conns := flag.Int("c", 64, "")
	dur := flag.Duration("d", 4*time.Second, "")
	no := flag.Bool("no", false, "")
	target := flag.String("t", "http://127.0.0.1:18070", "")
	flag.Parse()
	c, err := client.New(client.Config{Endpoints: []string{*target}, MaxInflight: *inflight, CoalesceWindow: *window, NoCoalesce: *no,
		HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}})
	if err != nil {
		panic(err)
	}
	_ = c.Refresh(context.Background())
	var mu sync.Mutex
	var lat []time.Duration
	end := time.Now().Add(*dur)
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var l []time.Duration
			for time.Now().Before(end) {
				t0 := time.Now()
				_, err := c.Allow(context.Background(), "k"+strconv.Itoa(rand.IntN(10000)), 1)
				if err != nil {
					panic(err)
				}
				l = append(l, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, l...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	st := c.Stats()
	fmt.Printf("inflight=%d window=%v no=%v: %.0f/s p50=%v p99=%v batches=%d avg=%.1f\n", *inflight, *window, *no, float64(len(lat))/dur.Seconds(),
		lat[len(lat)/2], lat[len(lat)*99/100], st.Batches, float64(st.Batched)/float64(max(st.Batches, 1)))
}
