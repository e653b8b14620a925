package peertls

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// File names inside a certificate directory.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	GossipKeyFile = "gossip.key"
)

// NodeFiles returns the certificate and key file names of node id in dir.
func NodeFiles(dir, id string) (cert, key string) {
	return filepath.Join(dir, id+".pem"), filepath.Join(dir, id+"-key.pem")
}

// Init creates dir (0700) and writes a new CA, a certificate and key for
// every node in nodes, with hosts[node] as extra SANs, and a gossip key.
// It refuses a dir that already holds a CA: use Add for more nodes.
func Init(dir string, nodes []string, hosts map[string][]string, now time.Time) error {
	if err := checkNodes(nodes, hosts); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, CAFile)); err == nil {
		return fmt.Errorf("peertls: %s already holds a CA; add nodes with `quorate certs add`", dir)
	}
	ca, err := NewAuthority(now)
	if err != nil {
		return err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	gossip, err := NewGossipKey()
	if err != nil {
		return err
	}
	if err := writeNew(filepath.Join(dir, CAKeyFile), caKey, 0o600); err != nil {
		return err
	}
	if err := writeNew(filepath.Join(dir, CAFile), ca.CertPEM(), 0o644); err != nil {
		return err
	}
	if err := writeNew(filepath.Join(dir, GossipKeyFile), gossip, 0o600); err != nil {
		return err
	}
	return issueAll(dir, ca, nodes, hosts, now)
}

// Add writes a certificate and key for every node in nodes, signed by the
// CA already in dir (ca.pem and ca-key.pem).
func Add(dir string, nodes []string, hosts map[string][]string, now time.Time) error {
	if err := checkNodes(nodes, hosts); err != nil {
		return err
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return fmt.Errorf("peertls: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return fmt.Errorf("peertls: %w", err)
	}
	ca, err := ParseAuthority(certPEM, keyPEM)
	if err != nil {
		return err
	}
	return issueAll(dir, ca, nodes, hosts, now)
}

func issueAll(dir string, ca *Authority, nodes []string, hosts map[string][]string, now time.Time) error {
	for _, id := range nodes {
		certPEM, keyPEM, err := ca.Issue(id, hosts[id], now)
		if err != nil {
			return err
		}
		certFile, keyFile := NodeFiles(dir, id)
		if err := writeNew(keyFile, keyPEM, 0o600); err != nil {
			return err
		}
		if err := writeNew(certFile, certPEM, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func checkNodes(nodes []string, hosts map[string][]string) error {
	if len(nodes) == 0 {
		return errors.New("peertls: no nodes named")
	}
	seen := map[string]bool{}
	for _, id := range nodes {
		if err := validNodeID(id); err != nil {
			return err
		}
		if seen[id] {
			return fmt.Errorf("peertls: node %q named twice", id)
		}
		seen[id] = true
	}
	for id := range hosts {
		if !seen[id] {
			return fmt.Errorf("peertls: hosts given for %q, which is not among the nodes", id)
		}
	}
	return nil
}

// writeNew writes b to a file that must not exist yet, with mode perm.
func writeNew(name string, b []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("peertls: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("peertls: write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("peertls: sync %s: %w", name, err)
	}
	return f.Close()
}
