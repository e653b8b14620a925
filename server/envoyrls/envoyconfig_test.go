package envoyrls_test

import (
	"encoding/json"
	"os"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// No Envoy binary can run here, so the example configuration the README
// points to is checked as Envoy reads it: parsed into its v3 Bootstrap,
// with every typed_config resolved to its message (an unknown field or
// type fails), then the protocol's validation rules (protoc-gen-validate,
// the rules Envoy applies at load). And it asks the rate-limit service
// the way this package answers: domain, V3, the quorate cluster.
func TestTheExampleEnvoyConfigLoads(t *testing.T) {
	data, err := os.ReadFile("../../deploy/envoy/envoy.yaml")
	require.NoError(t, err)
	var tree any
	require.NoError(t, yaml.Unmarshal(data, &tree))
	js, err := json.Marshal(tree)
	require.NoError(t, err)
	var b bootstrapv3.Bootstrap
	require.NoError(t, protojson.Unmarshal(js, &b))
	require.NoError(t, b.ValidateAll())

	l := b.GetStaticResources().GetListeners()
	require.Len(t, l, 1)
	var hcm hcmv3.HttpConnectionManager
	require.NoError(t, l[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm))
	var rl ratelimitfilterv3.RateLimit
	require.NoError(t, hcm.GetHttpFilters()[0].GetTypedConfig().UnmarshalTo(&rl))
	assert.Equal(t, "web", rl.GetDomain())
	assert.Equal(t, "quorate", rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName())
	assert.Equal(t, "V3", rl.GetRateLimitService().GetTransportApiVersion().String())
	assert.Equal(t, "authorization", rl.GetRateLimitService().GetGrpcService().GetInitialMetadata()[0].GetKey())
	var names []string
	for _, c := range b.GetStaticResources().GetClusters() {
		names = append(names, c.GetName())
	}
	assert.Contains(t, names, "quorate")
}
