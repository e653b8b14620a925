package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/client"
	"github.com/quorate/quorate/internal/logbuf"
	"github.com/quorate/quorate/server/httpapi"
)

// addrOn returns host:port on the given loopback IP (127.0.0.41-49 for
// this file's tests) with a port that was free a moment ago.
func addrOn(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// testPKI writes a CA and a server certificate for ip, signed by it, into
// dir and returns the paths and the CA's pool.
func testPKI(t *testing.T, dir, ip string) (caFile, certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "quorate test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP(ip)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return write("ca.pem", "CERTIFICATE", caDER), write("node.pem", "CERTIFICATE", leafDER), write("node.key", "PRIVATE KEY", keyDER), pool
}

// newToken runs `quorate token new --auth-file file` and returns the token.
func newToken(t *testing.T, file, name, role string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"token", "new", "--name", name, "--role", role, "--auth-file", file}, &out, &errOut), errOut.String())
	tok := strings.TrimSpace(out.String())
	require.True(t, strings.HasPrefix(tok, httpapi.TokenPrefix), "stdout is the token alone: %q", out.String())
	return tok
}

// serveOn runs `quorate serve` in-process with its HTTP API on httpAddr
// (its other ports on the same IP) and waits until GET base/readyz
// answers 200 through hc. It returns the node's log; the node stops when
// the test ends.
func serveOn(t *testing.T, httpAddr, base string, hc *http.Client, args ...string) *logbuf.Buffer {
	t.Helper()
	ip, _, err := net.SplitHostPort(httpAddr)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &logbuf.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--http-addr", httpAddr, "--raft-addr", addrOn(t, ip), "--gossip-addr", addrOn(t, ip),
			"--data-dir", filepath.Join(t.TempDir(), "d"), "--log-level", "info", "--groups", "2"}, args...), &bytes.Buffer{}, logs)
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			done <- err
			return true
		default:
		}
		resp, err := hc.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("serve exited early: %v\n%s", err, logs.String())
	default:
	}
	return logs
}

// A node with --auth-file and HTTPS: health checks open, every other call
// needs a token of the right role, and the CLI takes the token and the CA
// from flags or the environment.
func TestServeWithTokensOverHTTPS(t *testing.T) {
	dir := t.TempDir()
	const ip = "127.0.0.41"
	caFile, certFile, keyFile, pool := testPKI(t, dir, ip)
	authFile := filepath.Join(dir, "auth.json")
	admin := newToken(t, authFile, "ops", "admin")
	decide := newToken(t, authFile, "web", "decide")
	reader := newToken(t, authFile, "grafana", "read")
	st, err := os.Stat(authFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	addr := addrOn(t, ip)
	base := "https://" + addr
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	logs := serveOn(t, addr, base, hc, "--auth-file", authFile, "--http-tls-cert", certFile, "--http-tls-key", keyFile)
	assert.Contains(t, logs.String(), "https://"+addr)
	assert.NotContains(t, logs.String(), "INSECURE")

	status := func(method, path, token string) int {
		req, err := http.NewRequest(method, base+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, 200, status("GET", "/healthz", ""))
	assert.Equal(t, 200, status("GET", "/readyz", ""))
	assert.Equal(t, 401, status("GET", "/metrics", ""))
	assert.Equal(t, 200, status("GET", "/metrics", reader))
	assert.Equal(t, 403, status("GET", "/metrics", decide))
	assert.Equal(t, 403, status("POST", "/v1/leave", reader))
	assert.Equal(t, 401, status("POST", "/v1/leave", "qrt_not-a-token"))

	// Plain HTTP on the HTTPS port gets nothing useful.
	resp, err := http.Get("http://" + addr + "/v1/tiers")
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	}

	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append(args, "--addr", addr, "--ca-cert", caFile), &out, &bytes.Buffer{})
		return out.String(), err
	}
	_, err = cli("tier", "set", "free", "--capacity", "2", "--rate", "0")
	var ae *client.Error
	require.ErrorAs(t, err, &ae, "no token")
	assert.Equal(t, api.CodeUnauthenticated, ae.Code)
	assert.Equal(t, 1, exitCode(err))
	_, err = cli("tier", "set", "free", "--capacity", "2", "--rate", "0", "--token", decide)
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, api.CodeForbidden, ae.Code)
	out, err := cli("tier", "set", "free", "--capacity", "2", "--rate", "0", "--token", admin)
	require.NoError(t, err)
	assert.Contains(t, out, "applied in 2 group(s)")

	t.Setenv("QUORATE_TOKEN", decide)
	out, err = cli("allow", "carol")
	require.NoError(t, err)
	assert.Contains(t, out, "allowed")
	out, err = cli("client", "get", "carol")
	require.NoError(t, err)
	assert.Contains(t, out, `"client": "carol"`)
	_, err = cli("status")
	require.ErrorAs(t, err, &ae, "decide may not read the cluster")
	assert.Equal(t, api.CodeForbidden, ae.Code)

	t.Setenv("QUORATE_TOKEN", reader)
	t.Setenv("QUORATE_CA_CERT", caFile)
	var o bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"tier", "list", "--addr", addr}, &o, &bytes.Buffer{}), "CA and token from the environment")
	assert.Regexp(t, `free\s+token_bucket\s+2\s+0/s`, o.String())
	otherCA, _, _, _ := testPKI(t, t.TempDir(), ip)
	err = run(context.Background(), []string{"tier", "list", "--addr", "https://" + addr, "--ca-cert", otherCA}, &o, &bytes.Buffer{})
	require.Error(t, err, "a CA that did not sign the node's certificate")
	assert.Contains(t, err.Error(), "certificate")
}

// Without --auth-file a node starts only on a loopback --http-addr, unless
// --insecure, which it then says at every start.
func TestServeNeedsAuthOffLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:7070", ":7070", "192.0.2.2:7070", "quorate.example:7070"} {
		err := run(context.Background(), []string{"serve", "--http-addr", addr, "--data-dir", filepath.Join(t.TempDir(), "d")}, &bytes.Buffer{}, &bytes.Buffer{})
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), "--auth-file", addr)
		assert.Equal(t, 2, exitCode(err), addr)
	}
	for _, addr := range []string{"127.0.0.42:7070", "[::1]:7070", "localhost:7070"} {
		assert.True(t, loopbackAddr(addr), addr)
	}

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	sec, err := newAPISecurity(apiFlags{}, "0.0.0.0:7070", true, logger)
	require.NoError(t, err, "--insecure starts anyway")
	assert.Nil(t, sec.auth)
	assert.Contains(t, logs.String(), "INSECURE")
	assert.False(t, sec.options(httpapi.Options{}, true).LoopbackHostOnly)

	_, err = newAPISecurity(apiFlags{tlsCert: "c.pem"}, "127.0.0.1:7070", false, logger)
	assert.ErrorContains(t, err, "go together")
	_, err = newAPISecurity(apiFlags{authFile: filepath.Join(t.TempDir(), "missing.json")}, "0.0.0.0:7070", false, logger)
	assert.ErrorContains(t, err, "no such file")

	// A whole insecure node, on loopback here: it warns, and without tokens
	// it still refuses cross-site writes.
	addr := addrOn(t, "127.0.0.42")
	nodeLogs := serveOn(t, addr, "http://"+addr, http.DefaultClient, "--insecure")
	assert.Contains(t, nodeLogs.String(), "INSECURE")
}

// Issue 10's reproduction against a real node: a form posted from another
// site to POST /v1/leave is refused, and the node keeps serving.
func TestServeRefusesCrossSiteLeave(t *testing.T) {
	addr := addrOn(t, "127.0.0.43")
	serveOn(t, addr, "http://"+addr, http.DefaultClient)
	req, err := http.NewRequest("POST", "http://"+addr+"/v1/leave", strings.NewReader("confirm=yes"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	// The same request from a browser too old to send Origin: still refused (415).
	req, err = http.NewRequest("POST", "http://"+addr+"/v1/leave", strings.NewReader("confirm=yes"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)

	// A page that rebinds its name to this address: refused for its Host.
	req, err = http.NewRequest("GET", "http://"+addr+"/v1/cluster", nil)
	require.NoError(t, err)
	req.Host = "rebind.evil.example"
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	require.NoError(t, client.NewNode(addr, nil).Ready(context.Background()), "the node is still serving")
}

// SIGHUP reloads the auth file: a token added with `quorate token new`
// works once the node got the signal, and a removed one stops working.
func TestServeReloadsAuthFileOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.json")
	first := newToken(t, authFile, "first", "read")
	addr := addrOn(t, "127.0.0.44")
	child := startChild(t, addr, "--auth-file", authFile, "--data-dir", filepath.Join(dir, "d"),
		"--raft-addr", addrOn(t, "127.0.0.44"), "--gossip-addr", addrOn(t, "127.0.0.44"), "--groups", "2", "--log-level", "warn")
	ctx := context.Background()
	tiers := func(tok string) error {
		_, err := client.NewNode(addr, nil, client.WithToken(tok)).Tiers(ctx)
		return err
	}
	require.NoError(t, tiers(first))
	second := newToken(t, authFile, "second", "read")
	assert.Error(t, tiers(second), "not loaded before SIGHUP")

	// Keep only the second token, then tell the node.
	af, err := httpapi.ReadAuthFile(authFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(authFile, []byte(fmt.Sprintf(`{"tokens":[{"name":"second","role":"read","sha256":%q}]}`, af.Tokens[1].SHA256)), 0o600))
	require.NoError(t, child.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return tiers(second) == nil }, 10*time.Second, 10*time.Millisecond)
	assert.Error(t, tiers(first), "removed from the file")

}

// A reload that cannot load the file keeps the tokens loaded before.
func TestReloadKeepsTokensOnError(t *testing.T) {
	authFile := filepath.Join(t.TempDir(), "auth.json")
	tok := newToken(t, authFile, "ops", "admin")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	sec, err := newAPISecurity(apiFlags{authFile: authFile}, "127.0.0.45:7070", false, logger)
	require.NoError(t, err)
	ts := httptest.NewServer(httpapi.New(nil, sec.options(httpapi.Options{}, false)))
	defer ts.Close()
	get := func() int {
		req, err := http.NewRequest("GET", ts.URL+"/v1/nope", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusNotFound, get(), "a known token learns the route does not exist")
	for _, broken := range []string{`{"tokens":[]}`, `{"tokens":[{"name":"x","role":"root","sha256":"00"}]}`, `nope`} {
		require.NoError(t, os.WriteFile(authFile, []byte(broken), 0o600))
		sec.reload(logger)
		assert.Equal(t, http.StatusNotFound, get(), "after reloading %s", broken)
	}
	assert.Contains(t, logs.String(), "keeping the tokens loaded before")
}

func TestTokenNew(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"token", "new", "--name", "web", "--role", "decide"}, &out, &errOut))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	tok, ok := strings.CutPrefix(lines[0], "token: ")
	require.True(t, ok, lines[0])
	entryJSON, ok := strings.CutPrefix(lines[1], "auth-file entry: ")
	require.True(t, ok, lines[1])
	af, err := httpapi.ParseAuthFile([]byte(`{"tokens":[` + entryJSON + `]}`))
	require.NoError(t, err, "the printed entry goes into an auth file as is")
	assert.Equal(t, httpapi.TokenEntry{Name: "web", Role: httpapi.RoleDecide, SHA256: httpapi.HashToken(tok)}, af.Tokens[0])

	file := filepath.Join(t.TempDir(), "auth.json")
	newToken(t, file, "web", "decide")
	err = run(context.Background(), []string{"token", "new", "--name", "web", "--role", "read", "--auth-file", file}, &out, &errOut)
	assert.ErrorContains(t, err, "already has a token named")
	for _, args := range [][]string{
		{"token"},
		{"token", "new", "--name", "x"},
		{"token", "new", "--name", "x", "--role", "root"},
		{"token", "new", "--role", "read"},
		{"token", "new", "--name", "x", "--role", "read", "extra"},
	} {
		err := run(context.Background(), args, &out, &errOut)
		assert.Equal(t, 2, exitCode(err), "%q: %v", args, err)
	}
}
