//go:build linux

package control

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The nodes' API takes tokens, as a production cluster's would: Setup has
// the binary make one admin token for the run (quorate token new) into
// AuthFile, every node starts with --auth-file AuthFile, and HTTPClient
// sends the token on every request.

// AuthFile is the auth file every node is started with.
func (c *Cluster) AuthFile() string { return filepath.Join(c.opts.WorkDir, "auth.json") }

// Token is the run's admin token ("" before Setup), for callers that do
// not go through HTTPClient, such as curl.
func (c *Cluster) Token() string {
	if t := c.token.Load(); t != nil {
		return *t
	}
	return ""
}

// makeToken writes a fresh AuthFile holding one admin token and keeps the
// token for HTTPClient.
func (c *Cluster) makeToken(ctx context.Context) error {
	if err := os.Remove(c.AuthFile()); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("control: auth file: %w", err)
	}
	cmd := exec.CommandContext(ctx, c.opts.Binary, "token", "new", "--name", "jepsen", "--role", "admin", "--auth-file", c.AuthFile())
	cmd.Env = nodeEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("control: quorate token new: %w: %s", err, stderr.String())
	}
	token := strings.TrimSpace(string(out))
	c.token.Store(&token)
	return nil
}

// bearer adds the cluster's token (once Setup made it) to every request.
type bearer struct {
	next http.RoundTripper
	c    *Cluster
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	tok := b.c.token.Load()
	if tok == nil {
		return b.next.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	req.Header.Set("Authorization", "Bearer "+*tok)
	return b.next.RoundTrip(req)
}
