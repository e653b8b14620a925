package api_test

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/internal/grouphash"
)

// The table gives every code one kind and one status, and the kinds agree
// with the statuses: a 4xx decided nothing and is refused as it stands; a
// 503 that may have been decided is unknown, the rest retry-safe.
func TestEveryCodeHasAKindAndAStatus(t *testing.T) {
	require.NotEmpty(t, api.Codes())
	for _, c := range api.Codes() {
		m, ok := api.Lookup(c)
		require.True(t, ok, "%s", c)
		assert.Equal(t, m.Kind, api.KindOf(c), "%s", c)
		switch {
		case m.Status >= 400 && m.Status < 500:
			assert.Equal(t, api.Refused, m.Kind, "%s (%d)", c, m.Status)
			assert.Zero(t, m.RetryAfter, "%s", c)
		case m.Status == http.StatusServiceUnavailable:
			assert.Positive(t, m.RetryAfter, "%s: a 503 says when to try again", c)
			assert.NotEqual(t, api.Refused, m.Kind, "%s", c)
		default:
			assert.Equal(t, http.StatusInternalServerError, m.Status, "%s", c)
		}
	}
	for _, c := range []api.Code{api.CodeOutcomeUnknown, api.CodeTimeout, api.CodeInternal} {
		assert.Equal(t, api.Unknown, api.KindOf(c), "%s may have been decided", c)
	}
	for _, c := range []api.Code{api.CodeUnavailable, api.CodeShuttingDown, api.CodeOverloaded, api.CodeDiskFull} {
		assert.Equal(t, api.RetrySafe, api.KindOf(c), "%s decided nothing", c)
	}
	assert.Equal(t, api.Unknown, api.KindOf("from_a_newer_server"), "an unknown code never leads a caller to spend twice")
}

// The gRPC column agrees with the kinds: gRPC clients retry UNAVAILABLE, so
// it is exactly the retry-safe codes; a code that may have been decided is
// never a refusal's (INVALID_ARGUMENT and the like).
func TestGRPCCodesFollowTheKinds(t *testing.T) {
	refusals := []api.GRPCCode{api.GRPCInvalidArgument, api.GRPCNotFound, api.GRPCPermissionDenied, api.GRPCResourceExhausted,
		api.GRPCFailedPrecondition, api.GRPCUnimplemented, api.GRPCUnauthenticated}
	for _, c := range api.Codes() {
		m, _ := api.Lookup(c)
		require.NotZero(t, m.GRPC, "%s has no gRPC code", c)
		assert.Equal(t, m.Kind == api.RetrySafe, m.GRPC == api.GRPCUnavailable, "%s (%s) is gRPC %d", c, m.Kind, m.GRPC)
		if m.Kind == api.Refused {
			assert.Contains(t, refusals, m.GRPC, "%s", c)
		} else {
			assert.NotContains(t, refusals, m.GRPC, "%s", c)
		}
	}
	assert.Equal(t, api.GRPCInvalidArgument, mustLookup(t, api.CodeInvalidClient).GRPC)
	assert.Equal(t, api.GRPCUnauthenticated, mustLookup(t, api.CodeUnauthenticated).GRPC)
}

func mustLookup(t *testing.T, c api.Code) api.Meaning {
	t.Helper()
	m, ok := api.Lookup(c)
	require.True(t, ok, "%s", c)
	return m
}

func TestRoutesHashIsTheClusters(t *testing.T) {
	assert.Equal(t, grouphash.Name, api.RoutesHash)
}

// api is a leaf: a program that only wants the wire types links the
// standard library and bucket, nothing else of quorate or beyond.
func TestAPIImportsOnlyTheStandardLibraryAndBucket(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	assert.ElementsMatch(t, []string{"github.com/quorate/quorate/bucket", "github.com/quorate/quorate/api"}, deps)
}
