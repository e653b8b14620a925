//go:build faultinject

package main

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/quorate/quorate/cluster"
)

// faultInjection is true only in binaries built with the faultinject tag,
// for the fault suite in jepsen/: the node's clock gets an adjustable
// offset, set through PUT /debug/clock on the --debug-addr listener.
const faultInjection = true

type clockBody struct {
	OffsetNanos int64 `json:"offset_ns"`
}

func nodeClock() (cluster.Clock, func(*http.ServeMux)) {
	c := cluster.NewOffsetClock(cluster.SystemClock{})
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
