// Command quorate runs a quorate node (`quorate serve`) and talks to one
// (`quorate allow`, `quorate tier ...`, `quorate status`, ...).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errDenied) {
			fmt.Fprintln(os.Stderr, "quorate:", err)
		}
		os.Exit(exitCode(err))
	}
}
