//go:build !faultinject

package main

import (
	"net/http"

	"github.com/quorate/quorate/cluster/clock"
)

// faultInjection is false in real builds: the node reads the system clock
// and offers no way to skew it. See faultinject_on.go.
const faultInjection = false

func nodeClock() (clock.Clock, func(*http.ServeMux)) {
	return clock.System{}, nil
}
