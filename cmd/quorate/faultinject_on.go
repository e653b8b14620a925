//go:build faultinject

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"time"

	"github.com/quorate/quorate/cluster/clock"
)

// faultInjection is true only in binaries built with the faultinject tag,
// for the fault suite in jepsen/: the node's clock gets an adjustable
// offset, set through PUT /debug/clock on the --debug-addr listener, and
// starts at the offset in the environment's StartOffsetEnv (a node that
// starts with a wrong clock).
const faultInjection = true

// StartOffsetEnv names the environment variable with the clock offset a
// faultinject binary starts with (a Go duration, e.g. "2s").
const StartOffsetEnv = "FAULT_CLOCK_START_OFFSET"

type clockBody struct {
	OffsetNanos int64 `json:"offset_ns"`
}

func nodeClock() (clock.Clock, func(*http.ServeMux)) {
	c := clock.NewOffset(clock.System{})
	if v := os.Getenv(StartOffsetEnv); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			c.SetOffset(d)
		}
	}
	return c, func(mux *http.ServeMux) {
		mux.HandleFunc("PUT /debug/clock", func(w http.ResponseWriter, r *http.Request) {
			var b clockBody
			if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			c.SetOffset(time.Duration(b.OffsetNanos))
			_ = json.NewEncoder(w).Encode(clockBody{OffsetNanos: int64(c.Offset())})
		})
		mux.HandleFunc("GET /debug/clock", func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(clockBody{OffsetNanos: int64(c.Offset())})
		})
	}
}
