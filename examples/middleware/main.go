// Command middleware is a service limited by quorate in a few lines: every
// request is charged one token to its X-Api-Key, a denied one is answered
// 429 with Retry-After and the RateLimit fields, and while no quorate node
// can decide, each instance limits alone at its share of the tier's rate.
//
//	go run ./examples/middleware -quorate http://127.0.0.1:7070
//	curl -i -H 'X-Api-Key: alice' http://127.0.0.1:8080/
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/quorate/quorate/client"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "middleware:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("middleware", flag.ContinueOnError)
	endpoints := fs.String("quorate", "http://127.0.0.1:7070", "quorate nodes' base URLs, comma-separated")
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve on")
	instances := fs.Int("instances", 1, "instances of this service sharing the limits (for fail-local)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := client.New(client.Config{
		Endpoints:     strings.Split(*endpoints, ","),
		Token:         os.Getenv("QUORATE_TOKEN"), // a decide-role token
		OnUnavailable: client.FailLocal,
		Instances:     *instances,
	})
	if err != nil {
		return err
	}
	defer c.Close()

	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s\n", r.Header.Get("X-Api-Key"))
	})
	srv := &http.Server{Addr: *listen, Handler: client.Middleware(c, client.ByHeader("X-Api-Key"))(hello),
		ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("serving on http://%s, limited by %s", *listen, *endpoints)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
