package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quorate/quorate/transport/peertls"
)

// securityFlags are serve's cluster security settings (README, Security).
type securityFlags struct {
	clusterCA   string
	clusterCert string
	clusterKey  string
	gossipKey   string
	insecure    bool
}

func addSecurityFlags(fs *flag.FlagSet, f *securityFlags) {
	fs.StringVar(&f.clusterCA, "cluster-ca", "", "PEM file of the cluster CA (may hold several while one CA replaces another): the raft port accepts only peers whose certificate it signed")
	fs.StringVar(&f.clusterCert, "cluster-cert", "", "PEM file of this node's cluster certificate (naming its --node-id), for the raft port's mutual TLS")
	fs.StringVar(&f.clusterKey, "cluster-key", "", "PEM file of the key of --cluster-cert")
	fs.StringVar(&f.gossipKey, "gossip-key", "", "file with the gossip encryption key (base64 of 32 bytes; several lines while rotating, the first one in use)")
	fs.BoolVar(&f.insecure, "insecure", false, "run without the protections this node would otherwise require, with a warning at every start: cluster TLS and gossip encryption for a node that joins others or listens beyond loopback (anyone who reaches its raft or gossip port could then control the cluster), and API tokens on a non-loopback --http-addr")
}

// errInsecure explains the secure-by-default refusal.
var errInsecure = errors.New("this node joins a cluster or listens beyond loopback, so it needs --cluster-ca, --cluster-cert, --cluster-key and --gossip-key (`quorate certs init` writes them); --insecure runs it without, letting anyone who reaches the raft or gossip port take over the cluster")

// clusterSecurity loads the cluster TLS settings and gossip keys, and
// refuses to run without them when the node joins others or listens beyond
// loopback, unless --insecure; a node running without them because of
// --insecure says so in its log, at every start.
func clusterSecurity(f *securityFlags, nodeID, raftAddr, gossipAddr string, joins bool, logger *slog.Logger) (*peertls.Config, [][]byte, error) {
	given := 0
	for _, v := range []string{f.clusterCA, f.clusterCert, f.clusterKey} {
		if v != "" {
			given++
		}
	}
	if given != 0 && given != 3 {
		return nil, nil, usageError{errors.New("--cluster-ca, --cluster-cert and --cluster-key go together")}
	}
	var tlsConf *peertls.Config
	if given == 3 {
		c, err := peertls.LoadFiles(f.clusterCA, f.clusterCert, f.clusterKey)
		if err != nil {
			return nil, nil, err
		}
		if !peertls.Names(c.Cert, nodeID) {
			return nil, nil, fmt.Errorf("--cluster-cert is for %q, not for this node (--node-id %q)", c.Cert.Subject.CommonName, nodeID)
		}
		if until := time.Until(c.Cert.NotAfter); until < 30*24*time.Hour {
			logger.Warn("the cluster certificate expires soon; issue a new one (README, Security)", "not_after", c.Cert.NotAfter)
		}
		tlsConf = c
	}
	var keys [][]byte
	if f.gossipKey != "" {
		b, err := os.ReadFile(f.gossipKey)
		if err != nil {
			return nil, nil, fmt.Errorf("--gossip-key: %w", err)
		}
		if keys, err = peertls.ParseGossipKeys(b); err != nil {
			return nil, nil, fmt.Errorf("--gossip-key: %w", err)
		}
	}
	exposed := joins || !loopbackAddr(raftAddr) || !loopbackAddr(gossipAddr)
	switch {
	case tlsConf != nil && keys != nil:
	case f.insecure:
		logger.Warn("INSECURE (--insecure): running without cluster TLS or gossip encryption; anyone who reaches the raft port can speak raft and the internal RPC, and anyone who reaches the gossip port can join and steer placement",
			"cluster_tls", tlsConf != nil, "gossip_encrypted", keys != nil)
	case exposed:
		return nil, nil, usageError{errInsecure}
	}
	return tlsConf, keys, nil
}

const certsUsage = `Usage:
  quorate certs init --dir DIR --nodes n1,n2,n3 [--hosts n1=10.0.0.1,n1=n1.example,...]
  quorate certs add  --dir DIR --nodes n4 [--hosts n4=10.0.0.4]

init writes a new cluster CA (ca.pem, ca-key.pem), a certificate and key per
node (NODE.pem, NODE-key.pem, naming the node id; --hosts adds IP addresses
and DNS names) and a gossip key (gossip.key). add issues certificates for
more nodes with the CA already in DIR. Keys are written 0600; nothing is
overwritten. Keep ca-key.pem off the nodes.
`

// certs runs `quorate certs init|add`.
func certs(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "init" && args[0] != "add") {
		fmt.Fprint(stderr, certsUsage)
		return usageError{errors.New("certs: want init or add")}
	}
	sub := args[0]
	fs := flag.NewFlagSet("certs "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, certsUsage) }
	dir := fs.String("dir", "", "directory to write to")
	nodes := fs.String("nodes", "", "comma-separated node ids (as given to --node-id)")
	hostList := fs.String("hosts", "", "comma-separated node=host pairs: IP addresses or DNS names added to that node's certificate")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err}
	}
	if *dir == "" || *nodes == "" || fs.NArg() > 0 {
		fs.Usage()
		return usageError{errors.New("certs: --dir and --nodes are required, and nothing else")}
	}
	hosts := map[string][]string{}
	for _, pair := range splitList(*hostList) {
		id, host, ok := strings.Cut(pair, "=")
		if !ok || id == "" || host == "" {
			return usageError{fmt.Errorf("certs: --hosts: %q is not node=host", pair)}
		}
		hosts[id] = append(hosts[id], host)
	}
	ids := splitList(*nodes)
	do := peertls.Add
	if sub == "init" {
		do = peertls.Init
	}
	if err := do(*dir, ids, hosts, time.Now()); err != nil {
		return err
	}
	if sub == "init" {
		fmt.Fprintf(stdout, "wrote %s, %s (keep it off the nodes) and %s\n", filepath.Join(*dir, peertls.CAFile),
			filepath.Join(*dir, peertls.CAKeyFile), filepath.Join(*dir, peertls.GossipKeyFile))
	}
	for _, id := range ids {
		cert, key := peertls.NodeFiles(*dir, id)
		fmt.Fprintf(stdout, "wrote %s and %s for node %s\n", cert, key, id)
	}
	return nil
}
