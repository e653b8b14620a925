// Command ceiling serves quorate's HTTP API (the same server/httpapi
// handler) from an unreplicated, in-memory Service that decides with the
// same bucket package and semantics, but writes no log, fsyncs nothing and
// talks to no peer. Its throughput is the ceiling a quorate node is
// measured against by scripts/bench-peers.sh: what the HTTP layer and the
// decision cost on this machine, with nothing else.
//
//	go run ./scripts/ceiling -addr 127.0.0.1:17080
//
// It serves until SIGINT or SIGTERM. It starts with the built-in default
// policy; tiers, assignments and the default can be changed through the API
// and are lost when it stops. It binds to loopback by default and has no
// authentication: it is a benchmark tool, not a limiter to deploy.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/quorate/quorate/server/httpapi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		os.Exit(1)
	}
}

// run serves the API until ctx ends, then shuts the HTTP server down.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("ceiling", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:17080", "HTTP address to serve the v1 API on")
	shards := fs.Int("shards", 64, "independently locked parts of the client table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	svc, err := New(Options{Shards: *shards})
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The same registry shape and server settings as quorate serve, so the
	// HTTP path costs the same.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := &http.Server{
		Handler:           httpapi.New(svc, httpapi.Options{Logger: logger, Registerer: reg, Gatherer: reg}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "ceiling serving on http://%s (in memory, unreplicated)\n", ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
