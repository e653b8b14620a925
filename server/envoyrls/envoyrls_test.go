package envoyrls_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/cluster"
	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/clustertest"
	"github.com/quorate/quorate/fsm"
	"github.com/quorate/quorate/server/envoyrls"
	"github.com/quorate/quorate/server/httpapi"
)

// serve serves svc's rate-limit service on loopback and returns a client
// of it, both closed when the test ends.
func serve(t *testing.T, svc envoyrls.Service, opts envoyrls.Options) rlsv3.RateLimitServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	envoyrls.New(svc, opts).Register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// descriptor is one descriptor of key=value pairs, in order.
func descriptor(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// setTier sets tier's policy through n. Right after a cluster starts, a
// group's leadership may still move, and a change then fails (not the
// leader, or an outcome unknown); setting a tier is idempotent, so the
// setup tries again rather than fail the test on the cluster's start.
func setTier(t *testing.T, n *cluster.Node, tier string, p bucket.Policy) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := n.ChangeConfig(t.Context(), fsm.ConfigOp{Kind: fsm.OpSetTier, Tier: tier, Policy: p})
		return err == nil
	}, 20*time.Second, 10*time.Millisecond, "could not set tier %s", tier)
}

// Every field Envoy reads, through a real gRPC client and a real node: the
// client id of a descriptor, its cost, OK then OVER_LIMIT with the limit,
// what is left and when it is full, the overall code, and the RateLimit
// headers of the most constrained descriptor.
func TestShouldRateLimitOnANode(t *testing.T) {
	clock := clock.NewManual()
	reg := prometheus.NewRegistry()
	node := clustertest.StartNode(t, cluster.Options{Clock: clock, Registerer: reg})
	rls := serve(t, node, envoyrls.Options{Registerer: reg})
	ctx := t.Context()
	setTier(t, node, "free", bucket.Policy{Capacity: 2, Rate: bucket.Scale}) // full again 2 s after empty
	require.NoError(t, node.SetClientTier(ctx, "api/user=alice", "free", "ops"))

	one := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "alice")}, HitsAddend: 1}
	r, err := rls.ShouldRateLimit(ctx, one)
	require.NoError(t, err)
	free := &rlsv3.RateLimitResponse_RateLimit{Name: "free", RequestsPerUnit: 2, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND, UnitMultiplier: wrapperspb.UInt32(2)}
	assert.Equal(t, rlsv3.RateLimitResponse_OK, r.GetOverallCode())
	require.Len(t, r.GetStatuses(), 1)
	st := r.GetStatuses()[0]
	assert.Equal(t, rlsv3.RateLimitResponse_OK, st.GetCode())
	assert.True(t, protoEqual(free, st.GetCurrentLimit()), "current_limit %v", st.GetCurrentLimit())
	assert.Equal(t, uint32(1), st.GetLimitRemaining())
	assert.Equal(t, time.Second, st.GetDurationUntilReset().AsDuration())
	assert.Equal(t, map[string]string{"RateLimit-Limit": "2", "RateLimit-Remaining": "1", "RateLimit-Reset": "1",
		"RateLimit-Policy": `"free";q=2;w=2`, "RateLimit": `"free";r=1;t=1`}, headers(r.GetResponseHeadersToAdd()))

	// Two descriptors: alice's last token, and bob, on no tier, under the
	// default; the descriptor's hits_addend overrides the request's.
	two := &rlsv3.RateLimitRequest{Domain: "api", HitsAddend: 1, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		descriptor("user", "alice"), descriptor("user", "bob", "path", "/x"),
	}}
	two.Descriptors[1].HitsAddend = wrapperspb.UInt64(3)
	r, err = rls.ShouldRateLimit(ctx, two)
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, r.GetOverallCode())
	assert.Equal(t, uint32(0), r.GetStatuses()[0].GetLimitRemaining())
	bob, err := node.Client(ctx, "api/user=bob/path=/x")
	require.NoError(t, err)
	assert.Equal(t, bucket.DefaultTierName, bob.Tier)
	assert.Equal(t, bucket.BuiltinDefault.Capacity-3, bob.Decision.RemainingTokens(), "bob's descriptor took 3")
	assert.Equal(t, uint32(bucket.BuiltinDefault.Capacity-3), r.GetStatuses()[1].GetLimitRemaining())
	assert.Equal(t, "0", headers(r.GetResponseHeadersToAdd())["RateLimit-Remaining"], "the headers are alice's: fewer left")

	r, err = rls.ShouldRateLimit(ctx, two)
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, r.GetOverallCode(), "over if any descriptor is")
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, r.GetStatuses()[0].GetCode())
	assert.Equal(t, rlsv3.RateLimitResponse_OK, r.GetStatuses()[1].GetCode())
	assert.Equal(t, "1", headers(r.GetResponseHeadersToAdd())["Retry-After"], "the denied descriptor's headers")

	clock.Advance(2 * time.Second)
	r, err = rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "api", Descriptors: one.Descriptors}) // hits_addend 0 is 1
	require.NoError(t, err)
	assert.Equal(t, uint32(1), r.GetStatuses()[0].GetLimitRemaining(), "refilled, and one taken")

	// Every descriptor is counted in quorate_decisions_total, as HTTP
	// decisions are: alice 3 allowed and 1 denied, bob 2 allowed.
	assert.Equal(t, map[string]float64{"allowed/free": 3, "denied/free": 1, "allowed/default": 2}, decisionCounts(t, reg))
}

// decisionCounts reads quorate_decisions_total from reg, by outcome/tier.
func decisionCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "quorate_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["outcome"]+"/"+labels["tier"]] = m.GetCounter().GetValue()
		}
	}
	return out
}

// A request Envoy should not send is refused with INVALID_ARGUMENT, saying
// what is wrong, and decides nothing.
func TestShouldRateLimitRefusesBadRequests(t *testing.T) {
	node := clustertest.StartNode(t, cluster.Options{Registerer: prometheus.NewRegistry()})
	rls := serve(t, node, envoyrls.Options{})
	negative := descriptor("user", "neg")
	negative.IsNegativeHits = true
	override := descriptor("user", "over")
	override.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5}
	big := descriptor("user", "big")
	big.HitsAddend = wrapperspb.UInt64(uint64(bucket.MaxCost) + 1)
	many := make([]*ratelimitv3.RateLimitDescriptor, envoyrls.MaxDescriptors+1)
	for i := range many {
		many[i] = descriptor("n", fmt.Sprint(i))
	}
	for _, c := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		says string
	}{
		{"no domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "a")}}, "domain"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "api"}, "descriptor"},
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: many}, "at most 1000"},
		{"no entries", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{{}}}, "no entries"},
		{"empty key", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("", "a")}}, "empty key"},
		{"long id", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", strings.Repeat("x", api.MaxClientLen))}}, "bytes long"},
		{"control character", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "a\nb")}}, "control character"},
		{"negative hits", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{negative}}, "is_negative_hits"},
		{"limit override", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{override}}, "override"},
		{"hits too large", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "ok"), big}}, "hits_addend"},
	} {
		_, err := rls.ShouldRateLimit(t.Context(), c.req)
		st, ok := status.FromError(err)
		require.True(t, ok, "%s: %v", c.name, err)
		assert.Equal(t, codes.InvalidArgument, st.Code(), c.name)
		assert.Contains(t, st.Message(), c.says, c.name)
	}
	v, err := node.Client(t.Context(), "api/user=ok")
	require.NoError(t, err)
	assert.False(t, v.Known, "the valid descriptor of a refused request was not decided")
}

// With tokens, a call needs one that may decide, in the authorization
// metadata, as the HTTP API's decision routes do.
func TestShouldRateLimitNeedsADecideToken(t *testing.T) {
	tokens := map[httpapi.Role]string{}
	var f httpapi.AuthFile
	for _, r := range httpapi.Roles {
		tokens[r] = httpapi.NewToken()
		f.Tokens = append(f.Tokens, httpapi.TokenEntry{Name: "t-" + string(r), Role: r, SHA256: httpapi.HashToken(tokens[r])})
	}
	auth, err := httpapi.NewAuthenticator(f)
	require.NoError(t, err)
	node := clustertest.StartNode(t, cluster.Options{Registerer: prometheus.NewRegistry()})
	rls := serve(t, node, envoyrls.Options{Auth: auth})
	req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "a")}}
	call := func(authorization string) codes.Code {
		ctx := t.Context()
		if authorization != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", authorization)
		}
		_, err := rls.ShouldRateLimit(ctx, req)
		return status.Code(err)
	}
	assert.Equal(t, codes.Unauthenticated, call(""))
	assert.Equal(t, codes.Unauthenticated, call("Bearer "+httpapi.NewToken()))
	assert.Equal(t, codes.PermissionDenied, call("Bearer "+tokens[httpapi.RoleRead]))
	assert.Equal(t, codes.OK, call("Bearer "+tokens[httpapi.RoleDecide]))
	assert.Equal(t, codes.OK, call("bearer "+tokens[httpapi.RoleAdmin]))
}

// unavailable is a Service whose groups cannot decide.
type unavailable struct{ policy bucket.Policy }

func (u unavailable) Allow(context.Context, []fsm.AllowRequest) ([]fsm.Decision, error) {
	return nil, fmt.Errorf("group 3: %w", cluster.ErrUnavailable)
}

func (u unavailable) PolicyOf(string) (string, bucket.Policy) { return "open", u.policy }

// When the client's group cannot decide, a tier with when_unavailable
// allow is answered OK, without a balance or headers; any other is
// UNAVAILABLE, the code of the error table, which Envoy treats by its
// failure_mode_deny.
func TestShouldRateLimitWhenTheClusterCannotDecide(t *testing.T) {
	req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "a")}}
	open := bucket.Policy{Capacity: 60, Rate: bucket.Scale, WhenUnavailable: bucket.AllowDegraded}
	r, err := serve(t, unavailable{open}, envoyrls.Options{}).ShouldRateLimit(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, r.GetOverallCode())
	assert.Nil(t, r.GetStatuses()[0].GetDurationUntilReset(), "a degraded answer knows nothing of the balance")
	assert.Equal(t, uint32(60), r.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
	assert.Equal(t, rlsv3.RateLimitResponse_RateLimit_MINUTE, r.GetStatuses()[0].GetCurrentLimit().GetUnit(), "60 per minute")
	assert.Empty(t, r.GetResponseHeadersToAdd())

	_, err = serve(t, unavailable{bucket.Policy{Capacity: 60, Rate: bucket.Scale}}, envoyrls.Options{}).ShouldRateLimit(t.Context(), req)
	assert.Equal(t, codes.Unavailable, status.Code(err))
}

// A node that does not lead the client's group forwards the decision, as
// it does for HTTP: every node of three answers, and they share one
// bucket.
func TestShouldRateLimitOnEveryNodeOfThree(t *testing.T) {
	nodes := clustertest.StartCluster(t, 3, func(i int) cluster.Options {
		// An advertised HTTP address (routes name leaders by it); nothing
		// here calls it.
		return cluster.Options{Registerer: prometheus.NewRegistry(), HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 7071+i)}
	})
	setTier(t, nodes[0], "three", bucket.Policy{Capacity: 3, Rate: 0})
	require.NoError(t, nodes[0].SetClientTier(t.Context(), "api/user=shared", "three", "ops"))
	req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "shared")}}
	var got []rlsv3.RateLimitResponse_Code
	for _, n := range append(nodes, nodes[0]) {
		r, err := serve(t, n, envoyrls.Options{}).ShouldRateLimit(t.Context(), req)
		require.NoError(t, err)
		got = append(got, r.GetOverallCode())
	}
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT}, got)
}

// With two of three real nodes gone, the survivor's groups cannot decide:
// a descriptor of a tier with when_unavailable allow is answered OK,
// degraded, and one of a tier that denies is UNAVAILABLE, within the
// call's deadline.
func TestShouldRateLimitWhenTwoOfThreeNodesDie(t *testing.T) {
	nodes := clustertest.StartCluster(t, 3, func(i int) cluster.Options {
		return cluster.Options{Registerer: prometheus.NewRegistry(), HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 7171+i)}
	})
	ctx := t.Context()
	require.Eventually(t, func() bool { return nodes[0].ClusterVersion() >= fsm.ClusterVersionPolicies }, 20*time.Second, 10*time.Millisecond)
	setTier(t, nodes[0], "open", bucket.Policy{Capacity: 5, Rate: bucket.Scale, WhenUnavailable: bucket.AllowDegraded})
	setTier(t, nodes[0], "closed", bucket.Policy{Capacity: 5, Rate: bucket.Scale})
	for client, tier := range map[string]string{"api/user=o": "open", "api/user=c": "closed"} {
		// Idempotent, so tried again across a leadership change, as setTier is.
		require.Eventually(t, func() bool { return nodes[0].SetClientTier(ctx, client, tier, "ops") == nil },
			20*time.Second, 10*time.Millisecond, "could not assign %s", client)
	}
	require.Eventually(t, func() bool { // what the survivor's replicas will answer by
		o, _ := nodes[0].PolicyOf("api/user=o")
		c, _ := nodes[0].PolicyOf("api/user=c")
		return o == "open" && c == "closed"
	}, 10*time.Second, 5*time.Millisecond)
	rls := serve(t, nodes[0], envoyrls.Options{})
	require.NoError(t, nodes[1].Close())
	require.NoError(t, nodes[2].Close())

	call := func(user string) (*rlsv3.RateLimitResponse, error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return rls.ShouldRateLimit(cctx, &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", user)}})
	}
	r, err := call("o")
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, r.GetOverallCode())
	assert.Nil(t, r.GetStatuses()[0].GetDurationUntilReset(), "degraded: nothing of a balance")
	_, err = call("c")
	assert.Contains(t, []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.Unknown}, status.Code(err),
		"nothing decided, or not known to be: %v", err)
}

// The error table's gRPC numbers are gRPC's.
func TestTheTableUsesGRPCsNumbers(t *testing.T) {
	for want, got := range map[codes.Code]api.GRPCCode{
		codes.Unknown: api.GRPCUnknown, codes.InvalidArgument: api.GRPCInvalidArgument, codes.DeadlineExceeded: api.GRPCDeadlineExceeded,
		codes.NotFound: api.GRPCNotFound, codes.PermissionDenied: api.GRPCPermissionDenied, codes.ResourceExhausted: api.GRPCResourceExhausted,
		codes.FailedPrecondition: api.GRPCFailedPrecondition, codes.Unimplemented: api.GRPCUnimplemented, codes.Internal: api.GRPCInternal,
		codes.Unavailable: api.GRPCUnavailable, codes.Unauthenticated: api.GRPCUnauthenticated,
	} {
		assert.Equal(t, uint32(want), uint32(got), "%s", want)
	}
}

func headers(hs []*corev3.HeaderValue) map[string]string {
	out := map[string]string{}
	for _, h := range hs {
		out[h.GetKey()] = h.GetValue()
	}
	return out
}

func protoEqual(a, b *rlsv3.RateLimitResponse_RateLimit) bool {
	return a.GetName() == b.GetName() && a.GetRequestsPerUnit() == b.GetRequestsPerUnit() && a.GetUnit() == b.GetUnit() &&
		a.GetUnitMultiplier().GetValue() == b.GetUnitMultiplier().GetValue()
}
