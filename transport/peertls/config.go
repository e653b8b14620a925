package peertls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"
)

// Config is what a node needs to speak mutual TLS with its peers.
type Config struct {
	// Server accepts only TLS 1.3 clients that present a certificate
	// signed by the cluster CA.
	Server *tls.Config
	// Client presents this node's certificate and accepts only servers
	// whose certificate the cluster CA signed (whatever address was
	// dialled: see the package doc on identity).
	Client *tls.Config
	// Cert is this node's own certificate.
	Cert *x509.Certificate
}

// LoadFiles reads the CA bundle, this node's certificate and its key (all
// PEM) and builds a Config. caFile may hold several CA certificates (while
// one CA replaces another); the node's certificate must be signed by one of
// them.
func LoadFiles(caFile, certFile, keyFile string) (*Config, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("peertls: cluster CA: %w", err)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("peertls: cluster certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("peertls: cluster key: %w", err)
	}
	return NewConfig(caPEM, certPEM, keyPEM, time.Now())
}

// NewConfig builds a Config from PEM bytes, checking at now that the node's
// certificate chains to the CA bundle and may be used by clients and
// servers alike.
func NewConfig(caPEM, certPEM, keyPEM []byte, now time.Time) (*Config, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("peertls: cluster CA: no PEM certificate found")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("peertls: cluster certificate and key: %w", err)
	}
	leaf := pair.Leaf
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return nil, fmt.Errorf("peertls: this node's certificate (%s) does not verify against the cluster CA: %w", leaf.Subject.CommonName, err)
	}
	server := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    roots,
	}
	client := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		RootCAs:      roots,
		// The chain is verified below, by VerifyConnection, against the
		// cluster CA; only the host name check is left out, since peers
		// are dialled by address and identified by node id.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyServer(cs, roots)
		},
	}
	return &Config{Server: server, Client: client, Cert: leaf}, nil
}

// verifyServer checks that a server's certificate chains to roots.
func verifyServer(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("peertls: peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("peertls: peer certificate (%s): %w", cs.PeerCertificates[0].Subject.CommonName, err)
	}
	return nil
}
