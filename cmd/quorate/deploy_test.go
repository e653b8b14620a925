package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/quorate/quorate/internal/freeport"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/client"
)

const deployDir = "../../deploy"

// parseServe parses args as `quorate serve` would, without running it, and
// requires the flags that make a node secure: mutual TLS and encrypted
// gossip between nodes, tokens on its API.
func parseServe(t *testing.T, where string, args []string) {
	t.Helper()
	require.NotEmpty(t, args, where)
	require.Equal(t, "serve", args[0], where)
	fs, _ := newServeFlagSet(io.Discard)
	require.NoError(t, fs.Parse(args[1:]), "%s: %v", where, args)
	assert.Empty(t, fs.Args(), "%s: stray arguments", where)
	for _, f := range []string{"cluster-ca", "cluster-cert", "cluster-key", "gossip-key", "auth-file", "data-dir", "node-id", "raft-addr"} {
		assert.NotEmpty(t, fs.Lookup(f).Value.String(), "%s: --%s", where, f)
	}
	assert.Equal(t, "false", fs.Lookup("insecure").Value.String(), where)
}

// Every node the compose file, the Kubernetes manifest and the systemd
// unit start runs flags `quorate serve` takes, the secure way.
func TestDeployFilesRunRealServeFlags(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Command  []string
			Networks map[string]struct {
				IPv4 string `yaml:"ipv4_address"`
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(deployDir, "compose/compose.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &compose))
	require.Len(t, compose.Services, 3)
	for name, s := range compose.Services {
		parseServe(t, "compose "+name, s.Command)
		ip := s.Networks["quorate"].IPv4
		require.NotEmpty(t, ip, name)
		for _, f := range []string{"--http-addr", "--raft-addr", "--gossip-addr", "--grpc-addr"} {
			i := slices.Index(s.Command, f)
			require.GreaterOrEqual(t, i, 0, "%s: %s", name, f)
			assert.True(t, strings.HasPrefix(s.Command[i+1], ip+":"), "%s %s %s: the node binds and advertises its own address", name, f, s.Command[i+1])
		}
	}

	dec := yaml.NewDecoder(bytes.NewReader(must(os.ReadFile(filepath.Join(deployDir, "kubernetes/quorate.yaml")))))
	kinds := map[string]map[string]any{}
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		meta := doc["metadata"].(map[string]any)
		kinds[doc["kind"].(string)+"/"+meta["name"].(string)] = doc
	}
	require.Contains(t, kinds, "StatefulSet/quorate")
	require.Contains(t, kinds, "Service/quorate-peers")
	peers := kinds["Service/quorate-peers"]["spec"].(map[string]any)
	assert.Equal(t, "None", peers["clusterIP"], "headless")
	assert.Equal(t, true, peers["publishNotReadyAddresses"], "raft finds pods before they are ready")
	var sts struct {
		Spec struct {
			ServiceName string `yaml:"serviceName"`
			Template    struct {
				Spec struct {
					Containers []struct {
						Args           []string
						ReadinessProbe struct {
							HTTPGet struct{ Path string } `yaml:"httpGet"`
						} `yaml:"readinessProbe"`
					}
				}
			}
		}
	}
	require.NoError(t, remarshal(kinds["StatefulSet/quorate"], &sts))
	assert.Equal(t, "quorate-peers", sts.Spec.ServiceName)
	c := sts.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	k8sEnv := strings.NewReplacer("$(POD_NAME)", "quorate-1", "$(POD_IP)", "10.1.2.3", "$(POD_NAMESPACE)", "default")
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = k8sEnv.Replace(a)
	}
	parseServe(t, "kubernetes", args)

	unit := string(must(os.ReadFile(filepath.Join(deployDir, "systemd/quorate.service"))))
	exec := regexp.MustCompile(`(?m)^ExecStart=((?:.*\\\n)*.*)$`).FindStringSubmatch(unit)
	require.NotNil(t, exec, "ExecStart")
	line := strings.NewReplacer("\\\n", " ", "${NODE_ID}", "a", "${ADDR}", "10.0.0.1", `"${JOIN}"`, "10.0.0.2:7072").Replace(exec[1])
	fields := strings.Fields(line)
	require.Equal(t, "/usr/local/bin/quorate", fields[0])
	parseServe(t, "systemd", fields[1:])
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func remarshal(v any, out any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, out)
}

var metricName = regexp.MustCompile(`\bquorate_[a-z_]+`)

// Every metric the Grafana dashboard queries is one a node exports. The
// node is made to export the series that exist only once something
// happened: decisions over HTTP and gRPC, a batch, a refused new client
// and an unauthenticated call.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.json")
	token := newToken(t, authFile, "ops", "admin")
	_, addr, _ := startServe(t, "--data-dir", filepath.Join(dir, "d"), "--auth-file", authFile, "--max-clients", "2", "--grpc-addr", freeport.Addr(t))
	c := client.NewNode(addr, nil, client.WithToken(token))
	ctx := context.Background()
	_, err := c.AllowBatch(ctx, []api.AllowRequest{{Client: "a"}, {Client: "b"}})
	require.NoError(t, err)
	_, err = c.Allow(ctx, "c", 1, "")
	require.ErrorContains(t, err, "too_many_clients", "a third client past --max-clients 2")
	resp, err := http.Get("http://" + addr + "/v1/tiers")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	req, err := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(name, " ")
			exported[name] = true
			if typ == "histogram" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					exported[name+s] = true
				}
			}
		}
	}

	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	require.NoError(t, json.Unmarshal(must(os.ReadFile(filepath.Join(deployDir, "grafana/quorate-dashboard.json"))), &dash))
	queried := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			require.NotEmpty(t, names, "%q queries no quorate metric: %s", p.Title, tg.Expr)
			for _, n := range names {
				queried++
				assert.True(t, exported[n], "panel %q queries %s, which the node does not export", p.Title, n)
			}
		}
	}
	assert.Greater(t, queried, 30)
}
