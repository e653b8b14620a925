// Package peertls holds the cluster's own public-key infrastructure: a CA
// that signs one certificate per node, the TLS configurations the raft port
// speaks with them (TLS 1.3, client certificates required and verified both
// ways), and the gossip encryption key. It uses the standard library only.
//
// # Identity
//
// A node's certificate names its node id twice: as the subject's common
// name and as a DNS subject alternative name. [Names] is the check: a peer
// proves it is node X by completing a handshake with a certificate, signed
// by the cluster CA, that [Names] X. The host names and IP addresses given
// to [Authority.Issue] are added as further SANs for other tools; quorate
// itself does not match them against the address it dialled, because a
// node's identity, not its address, decides what it may do.
//
// # Files
//
// [Init] writes, into one directory:
//
//	ca.pem, ca-key.pem        the CA certificate and its key
//	<node>.pem, <node>-key.pem one certificate and key per node
//	gossip.key                base64 of 32 random bytes (memberlist's AES-256 key)
//
// Keys (and the gossip key) are written with mode 0600; an existing file is
// never overwritten.
package peertls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

// Validity of what Init and Add issue.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	NodeValidity = 2 * 365 * 24 * time.Hour
)

// Authority is a cluster CA: its certificate and signing key.
type Authority struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewAuthority creates a CA valid from now for CAValidity.
func NewAuthority(now time.Time) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "quorate cluster CA", Organization: []string{"quorate"}},
		NotBefore:             now.Add(-time.Hour), // tolerate clocks a little behind
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{Cert: cert, Key: key}, nil
}

// Issue returns a PEM certificate and PEM key for node id, signed by the
// CA, valid from now for NodeValidity, usable as both TLS server and
// client. hosts (IP addresses or DNS names) become extra SANs.
func (a *Authority) Issue(id string, hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	if err := validNodeID(id); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: id, Organization: []string{"quorate"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(NodeValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{id},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" && !slices.Contains(tmpl.DNSNames, h) {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, &key.PublicKey, a.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("peertls: certificate for %q: %w", id, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER), nil
}

// CertPEM and KeyPEM encode the CA's certificate and key.
func (a *Authority) CertPEM() []byte { return pemBlock("CERTIFICATE", a.Cert.Raw) }

// KeyPEM encodes the CA's private key (PKCS #8).
func (a *Authority) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(a.Key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

// ParseAuthority reads a CA from its PEM certificate and key.
func ParseAuthority(certPEM, keyPEM []byte) (*Authority, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("peertls: CA: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("peertls: CA key is not an ECDSA key")
	}
	if !pair.Leaf.IsCA {
		return nil, errors.New("peertls: CA certificate is not a CA")
	}
	return &Authority{Cert: pair.Leaf, Key: key}, nil
}

// Names reports whether cert names node id: as its subject common name or
// as one of its DNS SANs.
func Names(cert *x509.Certificate, id string) bool {
	if cert == nil || id == "" {
		return false
	}
	return cert.Subject.CommonName == id || slices.Contains(cert.DNSNames, id)
}

// NewGossipKey returns a new gossip key: 32 random bytes, base64-encoded,
// followed by a newline.
func NewGossipKey() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(k) + "\n"), nil
}

// ParseGossipKeys reads a gossip key file: one base64 key per line (16, 24
// or 32 bytes each; blank lines and lines starting with # are skipped).
// The first key encrypts what this node sends; every key decrypts what it
// receives, which is how a key is rotated (see the README).
func ParseGossipKeys(b []byte) ([][]byte, error) {
	var keys [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("peertls: gossip key, line %d: not base64: %w", i+1, err)
		}
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("peertls: gossip key, line %d: %d bytes, want 16, 24 or 32", i+1, n)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("peertls: gossip key file holds no key")
	}
	return keys, nil
}

// validNodeID accepts ids that fit in a DNS SAN: what x509 will encode.
func validNodeID(id string) error {
	if id == "" || len(id) > 253 {
		return fmt.Errorf("peertls: node id %q: want 1..253 characters", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return fmt.Errorf("peertls: node id %q: only letters, digits, '-', '.' and '_' fit in a certificate name", id)
		}
	}
	return nil
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
