package peertls_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/transport/peertls"
)

func TestInitWritesACAANodeCertificatesAndAGossipKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	now := time.Now()
	require.NoError(t, peertls.Init(dir, []string{"n1", "n2"}, map[string][]string{"n1": {"10.0.0.1", "n1.example"}}, now))

	for _, f := range []string{peertls.CAKeyFile, peertls.GossipKeyFile, "n1-key.pem", "n2-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), f)
	}
	b, err := os.ReadFile(filepath.Join(dir, peertls.GossipKeyFile))
	require.NoError(t, err)
	keys, err := peertls.ParseGossipKeys(b)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	assert.Len(t, keys[0], 32)

	cert, key := peertls.NodeFiles(dir, "n1")
	c, err := peertls.LoadFiles(filepath.Join(dir, peertls.CAFile), cert, key)
	require.NoError(t, err)
	assert.True(t, peertls.Names(c.Cert, "n1"))
	assert.False(t, peertls.Names(c.Cert, "n2"))
	assert.Contains(t, c.Cert.DNSNames, "n1.example")
	require.Len(t, c.Cert.IPAddresses, 1)
	assert.Equal(t, "10.0.0.1", c.Cert.IPAddresses[0].String())

	// Init never overwrites; Add issues more nodes with the same CA.
	assert.ErrorContains(t, peertls.Init(dir, []string{"n3"}, nil, now), "already holds a CA")
	assert.Error(t, peertls.Add(dir, []string{"n1"}, nil, now), "n1 exists")
	require.NoError(t, peertls.Add(dir, []string{"n3"}, nil, now))
	cert, key = peertls.NodeFiles(dir, "n3")
	_, err = peertls.LoadFiles(filepath.Join(dir, peertls.CAFile), cert, key)
	require.NoError(t, err)
}

func TestLoadRefusesACertificateOfAnotherCA(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	require.NoError(t, peertls.Init(a, []string{"n1"}, nil, time.Now()))
	require.NoError(t, peertls.Init(b, []string{"n1"}, nil, time.Now()))
	cert, key := peertls.NodeFiles(b, "n1")
	_, err := peertls.LoadFiles(filepath.Join(a, peertls.CAFile), cert, key)
	assert.ErrorContains(t, err, "does not verify against the cluster CA")
}

func TestParseGossipKeys(t *testing.T) {
	tests := []struct {
		in   string
		keys int
		err  string
	}{
		{"# rotation: new key first\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\nAAAAAAAAAAAAAAAAAAAAAA==\n", 2, ""},
		{"", 0, "no key"},
		{"not base64!\n", 0, "not base64"},
		{"AAAA\n", 0, "3 bytes"},
	}
	for _, tt := range tests {
		keys, err := peertls.ParseGossipKeys([]byte(tt.in))
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, "ParseGossipKeys(%q)", tt.in)
			continue
		}
		require.NoError(t, err, "ParseGossipKeys(%q)", tt.in)
		assert.Len(t, keys, tt.keys, "ParseGossipKeys(%q)", tt.in)
	}
}

func TestIssueRefusesNodeIDsThatFitNoCertificate(t *testing.T) {
	ca, err := peertls.NewAuthority(time.Now())
	require.NoError(t, err)
	_, _, err = ca.Issue("n 1", nil, time.Now())
	assert.ErrorContains(t, err, "only letters")
}
