package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/internal/freeport"
	"github.com/quorate/quorate/server/envoyrls"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// serveGRPC starts a node with --grpc-addr and returns its HTTP client, a
// rate-limit service client of its gRPC address, and its stop.
func serveGRPC(t *testing.T) (*client.Node, rlsv3.RateLimitServiceClient, func() error) {
	t.Helper()
	grpcAddr := freeport.Addr(t)
	c, _, stop := startServe(t, "--data-dir", filepath.Join(t.TempDir(), "d"), "--grpc-addr", grpcAddr)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return c, rlsv3.NewRateLimitServiceClient(conn), stop
}

// quorate serve --grpc-addr answers Envoy's ShouldRateLimit, sharing the
// buckets of the HTTP API, and stops with the node.
func TestServeGRPC(t *testing.T) {
	c, rls, stop := serveGRPC(t)
	req := &rlsv3.RateLimitRequest{Domain: "web", HitsAddend: 4, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}},
	}}
	r, err := rls.ShouldRateLimit(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, r.GetOverallCode())
	v, err := c.GetClient(context.Background(), "web/remote_address=10.0.0.1")
	require.NoError(t, err)
	assert.True(t, v.Known, "the HTTP API sees the bucket Envoy's call made")
	assert.Equal(t, int64(r.GetStatuses()[0].GetLimitRemaining()), v.Remaining)

	// A descriptor's client id holds slashes; the HTTP API takes it as one
	// escaped path segment, so its tier can be set.
	require.NoError(t, c.SetClientTier(context.Background(), "web/remote_address=10.0.0.1", "pro"))
	v, err = c.GetClient(context.Background(), "web/remote_address=10.0.0.1")
	require.NoError(t, err)
	assert.Equal(t, "pro", v.AssignedTier)
	require.NoError(t, stop())
}

// The largest request the service takes (MaxDescriptors descriptors with
// client ids near their longest) is several times gRPC's default 64 KiB
// window: the node's fixed receive windows still let all of it in, and
// every descriptor is answered.
func TestServeGRPCAnswersTheLargestRequest(t *testing.T) {
	_, rls, stop := serveGRPC(t)
	req := &rlsv3.RateLimitRequest{Domain: "web"}
	pad := strings.Repeat("v", 230)
	for i := range envoyrls.MaxDescriptors {
		req.Descriptors = append(req.Descriptors, &ratelimitv3.RateLimitDescriptor{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: fmt.Sprintf("%04d%s", i, pad)}},
		})
	}
	require.Greater(t, proto.Size(req), 3*64<<10, "several default windows")
	r, err := rls.ShouldRateLimit(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, r.GetOverallCode())
	assert.Len(t, r.GetStatuses(), envoyrls.MaxDescriptors)
	require.NoError(t, stop())
}

// A rate-limit service on an address others can reach needs tokens, as
// the HTTP API does.
func TestServeRefusesAnOpenGRPCAddr(t *testing.T) {
	err := run(context.Background(), []string{"serve", "--data-dir", t.TempDir(), "--grpc-addr", "0.0.0.0:0"}, &bytes.Buffer{}, &bytes.Buffer{})
	require.Error(t, err)
	assert.Equal(t, 2, exitCode(err))
	assert.Contains(t, err.Error(), "--grpc-addr 0.0.0.0:0 is not a loopback address")
}
