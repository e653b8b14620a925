package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/internal/connlimit"
	"github.com/quorate/quorate/server/envoyrls"
)

// checkGRPCAddr refuses a --grpc-addr that would answer anyone: one that
// is not loopback on a node without tokens, unless --insecure (the same
// rule as --http-addr's).
func checkGRPCAddr(addr string, sec *apiSecurity, insecure bool) error {
	if addr == "" || sec.auth != nil || insecure || loopbackAddr(addr) {
		return nil
	}
	return usageError{fmt.Errorf("--grpc-addr %s is not a loopback address, and the rate-limit service would decide for anyone who can reach it: "+
		"give --auth-file (a decide token for Envoy: quorate token new --role decide), or --insecure to run without protection", addr)}
}

// grpcMaxRequest is the largest request the service reads (a request of
// MaxDescriptors long descriptors fits), and each stream's and
// connection's fixed receive window: all a connection may have sent that
// the node has not read.
const grpcMaxRequest = 1 << 20

// grpcServer is the Envoy rate-limit service of a running node.
type grpcServer struct {
	srv  *grpc.Server
	addr string
	errc chan error
}

// startGRPC serves the Envoy rate-limit service (package envoyrls) of node
// on addr, with the HTTP API's TLS certificate and tokens, counting its
// decisions on reg and its connections in caps, with the HTTP port's.
func startGRPC(addr string, node *cluster.Node, sec *apiSecurity, reg prometheus.Registerer, caps *connlimit.Counter) (*grpcServer, error) {
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("grpc listener: %w", err)
	}
	ln := newLimitListener(raw, caps)
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(grpcMaxRequest),
		grpc.ConnectionTimeout(10 * time.Second),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 2 * time.Minute}),
		// Fixed receive windows instead of grpc-go's, which grow by
		// bandwidth-delay estimation (a PING per burst) up to 16 MiB a
		// connection: requests are small, and a fixed window bounds what
		// one connection can make the node buffer (the README's gRPC
		// figures have what it measured).
		grpc.InitialWindowSize(grpcMaxRequest),
		grpc.InitialConnWindowSize(grpcMaxRequest),
	}
	if sec.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(sec.tls.Clone())))
	}
	eo := envoyrls.Options{Registerer: reg}
	if sec.auth != nil {
		eo.Auth = sec.auth
	}
	g := &grpcServer{srv: grpc.NewServer(opts...), addr: ln.Addr().String(), errc: make(chan error, 1)}
	envoyrls.New(node, eo).Register(g.srv)
	go func() {
		if err := g.srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			g.errc <- err
		}
	}()
	return g, nil
}

// stop lets calls in flight finish for up to ctx's deadline, then cuts
// the rest.
func (g *grpcServer) stop(ctx context.Context, logger *slog.Logger) {
	done := make(chan struct{})
	go func() { g.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		logger.Warn("grpc shutdown: calls still in flight were cut")
		g.srv.Stop()
	}
}
