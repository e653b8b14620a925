package main

import (
	"context"
	"fmt"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// envoyCaller asks quorate's Envoy rate-limit service (serve --grpc-addr),
// as Envoy's ratelimit filter does: one ShouldRateLimit per call, one
// descriptor per key. Like Envoy, which keeps one HTTP/2 connection to
// the service per worker thread, callers share a few connections
// (envoyConns per target), their calls multiplexed as streams; plaintext,
// as the benchmark's nodes run without TLS on loopback.
type envoyCaller struct {
	rls   rlsv3.RateLimitServiceClient
	token string
}

// envoyConns is how many HTTP/2 connections the callers of one target
// share: Envoy's worker threads on this 2-core machine.
const envoyConns = 2

// envoyWindow is Envoy's default initial HTTP/2 stream window (256 MiB is
// its connection window; 64 KiB .. 16 MiB is what grpc-go accepts here).
const envoyWindow = 1 << 24

// envoyPool hands out the connections to each target in turn.
type envoyPool struct {
	conns map[string][]*grpc.ClientConn
	next  map[string]int
}

func (p *envoyPool) caller(target, token string) (*envoyCaller, error) {
	if len(p.conns[target]) < envoyConns {
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
			// Fixed windows, as Envoy's HTTP/2 client has: grpc-go's own
			// window estimation pings the server with every burst of data.
			grpc.WithInitialWindowSize(envoyWindow), grpc.WithInitialConnWindowSize(envoyWindow))
		if err != nil {
			return nil, err
		}
		p.conns[target] = append(p.conns[target], conn)
	}
	conn := p.conns[target][p.next[target]%len(p.conns[target])]
	p.next[target]++
	return &envoyCaller{rls: rlsv3.NewRateLimitServiceClient(conn), token: token}, nil
}

func (p *envoyPool) close() {
	for _, cs := range p.conns {
		for _, c := range cs {
			_ = c.Close()
		}
	}
}

func (e *envoyCaller) call(ctx context.Context, keys []string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if e.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+e.token)
	}
	req := &rlsv3.RateLimitRequest{Domain: "load", HitsAddend: 1, Descriptors: make([]*ratelimitv3.RateLimitDescriptor, len(keys))}
	for i, k := range keys {
		req.Descriptors[i] = &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "id", Value: k}}}
	}
	resp, err := e.rls.ShouldRateLimit(ctx, req)
	if err != nil {
		return 0, err
	}
	if len(resp.Statuses) != len(keys) {
		return 0, fmt.Errorf("%d descriptors answered with %d statuses", len(keys), len(resp.Statuses))
	}
	allowed := 0
	for _, s := range resp.Statuses {
		if s.Code == rlsv3.RateLimitResponse_OK {
			allowed++
		}
	}
	return allowed, nil
}

func (e *envoyCaller) close() {} // the pool closes the connections
