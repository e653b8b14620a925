// Package peertlstest makes a cluster authority and node certificates for
// tests, as `quorate certs` would.
package peertlstest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/transport/peertls"
)

// Authority is a new cluster CA.
func Authority(t testing.TB) *peertls.Authority {
	t.Helper()
	ca, err := peertls.NewAuthority(time.Now())
	require.NoError(t, err)
	return ca
}

// Node is the TLS settings of node id, with a certificate of ca for
// 127.0.0.1.
func Node(t testing.TB, ca *peertls.Authority, id string) *peertls.Config {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(id, []string{"127.0.0.1"}, time.Now())
	require.NoError(t, err)
	c, err := peertls.NewConfig(ca.CertPEM(), certPEM, keyPEM, time.Now())
	require.NoError(t, err)
	return c
}
