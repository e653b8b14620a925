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
	"net/http/pprof"
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/cluster/memlimit"
	"github.com/quorate/quorate/internal/connlimit"
	"github.com/quorate/quorate/internal/rtmetrics"
	"github.com/quorate/quorate/server/httpapi"
)

// serveFlags are `quorate serve`'s settings.
// maxHeaderBytes bounds a request's headers (net/http's default is 1 MiB):
// quorate's callers send a few short headers. net/http enforces it
// loosely: it reads ahead in 4 KiB buffers, and served headers of up to
// 22.5 KiB at this setting when measured; 24 KiB (headerRefused) is always
// refused.
const (
	maxHeaderBytes = 16 << 10
	headerRefused  = maxHeaderBytes + 8<<10
)

type serveFlags struct {
	nodeID      string
	dataDir     string
	httpAddr    string
	grpcAddr    string
	raftAddr    string
	gossipAddr  string
	join        string
	replicas    int
	deadAfter   time.Duration
	leaveOnTerm bool
	groups      int
	logStore    string
	walSync     time.Duration
	config      string
	logLevel    string
	logFormat   string
	maxBatch    int
	maxInflight int
	maxPending  int
	maxClients  int
	minFreeDisk int64
	maxMemory   int64
	maxConns    int
	maxConnsIP  int
	maxOffset   time.Duration
	reclaim     time.Duration
	debugAddr   string
	raftTimeout time.Duration
	api         apiFlags
	security    securityFlags
}

func newServeFlagSet(stderr io.Writer) (*flag.FlagSet, *serveFlags) {
	f := &serveFlags{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defaultBudget := memlimit.Default() // for the help texts: one read of the machine's memory
	fs.StringVar(&f.nodeID, "node-id", "node1", "this node's name in raft and membership")
	fs.StringVar(&f.dataDir, "data-dir", "quorate-data", "directory for raft logs, snapshots and node identity")
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:7070", "host:port of the HTTP API")
	fs.StringVar(&f.grpcAddr, "grpc-addr", "", "if set, host:port of Envoy's rate-limit service (gRPC, envoy.service.ratelimit.v3), with the HTTP API's TLS and tokens")
	fs.StringVar(&f.raftAddr, "raft-addr", "127.0.0.1:7071", "host:port of the raft transport and internal RPC; peers dial it")
	fs.StringVar(&f.gossipAddr, "gossip-addr", "127.0.0.1:7072", "host:port for memberlist gossip (TCP and UDP)")
	fs.StringVar(&f.join, "join", "", "comma-separated gossip addresses of existing nodes; empty on the first node of a new cluster")
	fs.IntVar(&f.replicas, "replicas", cluster.DefaultReplicas, "voters per group (each group has min(replicas, live nodes))")
	fs.DurationVar(&f.deadAfter, "dead-after", cluster.DefaultDeadAfter, "how long a node must be dead before its replicas are placed elsewhere")
	fs.BoolVar(&f.leaveOnTerm, "leave-on-terminate", false, "on SIGINT/SIGTERM, leave the cluster (hand over groups, be removed as a voter) instead of just stopping")
	fs.IntVar(&f.groups, "groups", 0, fmt.Sprintf("number of data groups, fixed when the cluster is created; 0: the data dir's, or for a new one %d, or its cluster's when it joins one", cluster.DefaultGroups))
	fs.StringVar(&f.logStore, "log-store", "", `raft log layout: "shared" (one log for every group, fsyncs shared) or "boltdb" (a raft-boltdb file per group); empty: the data dir's, "shared" for a new one`)
	fs.DurationVar(&f.walSync, "wal-sync-interval", 0, fmt.Sprintf("shared log store: keep fsyncs at least this far apart (0..%s), so that more commits share each; less CPU where nodes saturate their cores, up to a millisecond more latency per decision on a quiet node; 0: no spacing", cluster.MaxWALSyncInterval))
	fs.StringVar(&f.config, "config", "", "JSON file with the default policy and tiers a new cluster starts with")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.IntVar(&f.maxBatch, "max-batch", cluster.DefaultMaxBatch, "most decisions in one raft entry")
	fs.IntVar(&f.maxInflight, "max-inflight", cluster.DefaultMaxInflight, "allow entries in flight per group leader")
	fs.IntVar(&f.maxPending, "max-pending", cluster.DefaultMaxPending, "most decisions callers may wait for on this node; past it calls get 503 overloaded at once")
	fs.DurationVar(&f.maxOffset, "max-clock-offset", cluster.DefaultMaxClockOffset, "Δ, the largest offset allowed between the clocks of two nodes that stamp decisions: a node stamps only once its clock is within half of it from its peers' median, and stops when it is not (negative, e.g. -1s: no check)")
	fs.Int64Var(&f.minFreeDisk, "min-free-disk", cluster.DefaultMinFreeDisk, "bytes kept free in the data dir's file system: below it, new decisions get 503 disk_full and the node is not ready (negative: no check)")
	fs.Int64Var(&f.maxMemory, "max-memory", 0, fmt.Sprintf("memory budget in bytes: near it (70%% of it live), new clients and request ids get 503 overloaded and held clients are still decided; 85%% of it is the Go runtime's soft memory limit (0: a quarter of the machine's or cgroup's memory, here %d MiB; negative: none)", defaultBudget>>20))
	fs.IntVar(&f.maxConns, "max-http-conns", 0, fmt.Sprintf("most connections the HTTP and gRPC ports keep open at once, together; one beyond is closed at once (0: half the process's file descriptors, at most 16384, and at most what a tenth of the memory budget holds at %d KiB a connection; here %d with the default budget)", perConnMemory>>10, defaultMaxHTTPConns(defaultBudget)))
	fs.IntVar(&f.maxConnsIP, "max-http-conns-per-ip", defaultMaxHTTPConnsPerIP, "most connections the HTTP and gRPC ports keep open from one address, together")
	fs.IntVar(&f.maxClients, "max-clients", cluster.DefaultMaxClients, "most client buckets this node may hold; past it new clients get 503 too_many_clients (negative: no limit)")
	fs.DurationVar(&f.raftTimeout, "raft-timeout", cluster.DefaultRaftTimings.ElectionTimeout,
		"raft heartbeat and election timeout (also the leader lease; heartbeats go every third of it); lower fails over faster and costs more heartbeats")
	fs.StringVar(&f.debugAddr, "debug-addr", "", "if set, serve Go's pprof profiles on this host:port: loopback only unless --insecure, and with --auth-file only to admin tokens")
	fs.DurationVar(&f.reclaim, "reclaim-interval", cluster.DefaultReclaimInterval, "how often full buckets are forgotten (negative: never)")
	f.api.register(fs)
	addSecurityFlags(fs, &f.security)
	return fs, f
}

// parseWithEnv parses args, then fills every flag not given on the command
// line from QUORATE_<NAME> (upper case, '-' as '_') if that is set.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := "QUORATE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && !set[f.Name] {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	})
	return errors.Join(errs...)
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}

// serve runs a node until ctx is cancelled (SIGINT/SIGTERM), then shuts
// down gracefully: stop taking requests, finish those in flight, stop raft.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f := newServeFlagSet(stderr)
	if err := parseWithEnv(fs, args); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("serve takes no arguments, got %q", fs.Args())}
	}
	if f.maxConns < 0 || f.maxConnsIP < 1 {
		return usageError{fmt.Errorf("--max-http-conns must be at least 1 (or 0 for the default) and --max-http-conns-per-ip at least 1")}
	}
	logger, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return usageError{err}
	}
	// Everything the node writes (raft logs, snapshots, quorate.json) holds
	// client and request ids: owner only, pebble's and bolt's files too.
	syscall.Umask(0o077)
	initial, err := loadConfig(f.config)
	if err != nil {
		return err
	}
	sec, err := newAPISecurity(f.api, f.httpAddr, f.security.insecure, logger)
	if err == nil {
		err = checkGRPCAddr(f.grpcAddr, sec, f.security.insecure)
	}
	if err != nil {
		return err
	}
	// From here on SIGHUP reloads rather than kills, also while starting.
	defer sec.reloadOnHangup(logger)()

	if f.raftTimeout < 20*time.Millisecond {
		return usageError{fmt.Errorf("--raft-timeout must be at least 20ms, got %v", f.raftTimeout)}
	}
	timings := cluster.DefaultRaftTimings
	timings.HeartbeatTimeout, timings.ElectionTimeout, timings.LeaderLeaseTimeout = f.raftTimeout, f.raftTimeout, f.raftTimeout

	clock, faultRoutes := nodeClock()
	if faultInjection {
		if f.debugAddr == "" {
			return usageError{fmt.Errorf("this binary is built with fault injection (tag faultinject) and needs --debug-addr; do not run it in production")}
		}
		logger.Warn("FAULT INJECTION BUILD: the clock can be skewed through --debug-addr; for the fault suite only")
	}
	if f.debugAddr != "" && !loopbackAddr(f.debugAddr) && !f.security.insecure && !faultInjection {
		return usageError{fmt.Errorf("--debug-addr %s is not a loopback address: the profiles it serves show the node's memory; keep it on 127.0.0.1, or give --insecure to expose it", f.debugAddr)}
	}

	clusterTLS, gossipKeys, err := clusterSecurity(&f.security, f.nodeID, f.raftAddr, f.gossipAddr, f.join != "", logger)
	if err != nil {
		return err
	}

	budget := memoryBudget(f.maxMemory)
	maxConns := f.maxConns
	if maxConns == 0 {
		maxConns = defaultMaxHTTPConns(budget)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	node, err := cluster.New(cluster.Options{
		NodeID:          f.nodeID,
		DataDir:         f.dataDir,
		RaftAddr:        f.raftAddr,
		HTTPAddr:        f.httpAddr,
		GossipAddr:      f.gossipAddr,
		Join:            splitList(f.join),
		Replicas:        f.replicas,
		DeadAfter:       f.deadAfter,
		Groups:          f.groups,
		LogStore:        f.logStore,
		WALSyncInterval: f.walSync,
		Initial:         initial,
		Logger:          logger,
		Registerer:      reg,
		MaxBatch:        f.maxBatch,
		MaxInflight:     f.maxInflight,
		MaxPending:      f.maxPending,
		MaxClients:      f.maxClients,
		MinFreeDisk:     f.minFreeDisk,
		MaxMemory:       budget,
		MaxClockOffset:  f.maxOffset,
		ReclaimInterval: f.reclaim,
		Raft:            timings,
		Clock:           clock,
		TLS:             clusterTLS,
		GossipKeys:      gossipKeys,
	})
	if err != nil {
		return err
	}
	defer node.Close()

	raw, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	caps := connlimit.New(maxConns, f.maxConnsIP) // the HTTP and gRPC ports' together
	var ln net.Listener = newLimitListener(raw, caps)
	scheme := "http"
	if sec.tls != nil {
		scheme = "https"
	}
	api := httpapi.New(node, sec.options(httpapi.Options{Logger: logger, Registerer: reg, Gatherer: reg, Scheme: scheme}, f.security.insecure))
	var handler http.Handler = api
	var guard *idleGuard
	if sec.auth != nil {
		guard = newIdleGuard(sec.auth, unauthenticatedIdle)
		handler = guard.Handler(api)
	}
	srv := &http.Server{
		TLSConfig:         sec.tls,
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A handler may wait out the longest deadline a caller can ask for;
		// past that, and a little, the connection is cut.
		WriteTimeout:   httpapi.DefaultMaxTimeout + 5*time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if guard != nil {
		srv.ConnContext, srv.ConnState = guard.ConnContext, guard.ConnState
	}
	errc := make(chan error, 1)
	if sec.tls != nil {
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	if f.debugAddr != "" {
		dbg := &http.Server{Addr: f.debugAddr, Handler: debugGuard(debugMux(faultRoutes), sec.auth), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := dbg.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("debug listener", "err", err)
			}
		}()
		defer dbg.Close()
	}
	var rls *grpcServer
	grpcErr := make(chan error)
	if f.grpcAddr != "" {
		if rls, err = startGRPC(f.grpcAddr, node, sec, reg, caps); err != nil {
			_ = srv.Close()
			_ = node.Close()
			return err
		}
		grpcErr = rls.errc
		logger.Info("envoy rate-limit service serving", "grpc", rls.addr, "tls", sec.tls != nil)
	}
	logger.Info("quorate serving", "node", f.nodeID, "http", scheme+"://"+ln.Addr().String(), "tokens", sec.auth != nil, "data_dir", f.dataDir)

	left := false
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case err := <-grpcErr:
		return fmt.Errorf("grpc server: %w", err)
	case <-node.Done():
		left = true // POST /v1/leave
	case <-ctx.Done():
	}
	if !left && f.leaveOnTerm {
		logger.Info("leaving the cluster")
		lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := node.Leave(lctx); err != nil {
			logger.Warn("leave did not complete", "err", err)
		}
		cancel()
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if rls != nil {
		rls.stop(sctx, logger)
	}
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("http shutdown", "err", err)
	}
	if err := node.Close(); err != nil {
		return fmt.Errorf("node shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// debugGuard lets through to the debug listener only requests addressed to
// an IP address or localhost (a web page cannot reach it by rebinding a
// DNS name of its own to the node's address) and, with tokens, only admin
// ones: profiles show the node's memory, and a CPU profile costs CPU.
func debugGuard(next http.Handler, auth *httpapi.Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if net.ParseIP(strings.Trim(host, "[]")) == nil && !strings.EqualFold(host, "localhost") {
			http.Error(w, "the debug listener answers only requests addressed to an IP address or localhost", http.StatusForbidden)
			return
		}
		if auth != nil && !auth.Admin(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="quorate"`)
			http.Error(w, "the debug listener needs an admin token (Authorization: Bearer <token>)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// debugMux serves the pprof profiles and the runtime's counters (for the
// cost ledger of scripts/loadgen), on their own listener so that they are
// never exposed with the API.
func debugMux(extra func(*http.ServeMux)) *http.ServeMux {
	mux := http.NewServeMux()
	if extra != nil {
		extra(mux)
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle(rtmetrics.Path, rtmetrics.Handler())
	return mux
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// memoryBudget returns the node's memory budget for --max-memory (see
// cluster.Options.MaxMemory) and sets the Go runtime's soft memory limit to
// 85% of it, unless GOMEMLIMIT sets one: collecting more often near the
// budget keeps the live heap the node sheds by close to the truth, and the
// margin is for memory the runtime has freed but not yet returned.
func memoryBudget(flag int64) int64 {
	budget := flag
	if budget == 0 {
		budget = memlimit.Default()
	}
	if budget > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(budget / 20 * 17)
	}
	return budget
}
