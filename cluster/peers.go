package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/transport/peertls"
	"github.com/quorate/quorate/transport/raftmux"
)

// proofTimeout bounds one proof: dial, handshake, question and answer.
const proofTimeout = 2 * time.Second

// trustedMembers is the membership placement acts on (see
// membership.Proofs, which also says why).
func (n *Node) trustedMembers() map[string]membership.Member {
	return n.proofs.Trusted(n.members.Snapshot())
}

// provePeers proves, in parallel, every member that needs it. It runs on
// one goroutine (n.every), so a member is never proved twice at once.
func (n *Node) provePeers() {
	if n.proofs == nil {
		return
	}
	now := time.Now()
	var wg sync.WaitGroup
	for id, mb := range n.members.Snapshot() {
		if !n.proofs.NeedsProof(mb, now) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), proofTimeout)
			defer cancel()
			leaving, err := n.prove(ctx, id, mb.Meta.RaftAddr)
			n.proofs.Record(id, mb.Meta.RaftAddr, leaving, err, time.Now())
			if err != nil {
				n.logger.Warn("gossip member failed to prove its identity; it is not placed", "member", id, "raft", mb.Meta.RaftAddr, "err", err)
				return
			}
			n.logger.Debug("gossip member proved its identity", "member", id, "raft", mb.Meta.RaftAddr, "leaving", leaving)
			kick(n.placementCh)
		}()
	}
	wg.Wait()
}

// whoami is what a node answers about itself on /internal/whoami.
type whoami struct {
	ID      string `json:"id"`
	Leaving bool   `json:"leaving"`
}

func (n *Node) whoami(context.Context, struct{}) (whoami, error) {
	return whoami{ID: n.opts.NodeID, Leaving: n.leaving.Load()}, nil
}

// prove dials addr's internal RPC over mutual TLS, checks that the
// certificate that answered names node id, and asks that node, on the same
// authenticated stream, who it is and whether it is leaving.
func (n *Node) prove(ctx context.Context, id, addr string) (leaving bool, err error) {
	if addr == "" {
		return false, fmt.Errorf("no raft address in its gossip metadata")
	}
	conn, err := n.rpcLn.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	cert := raftmux.PeerCertificate(conn)
	if cert == nil {
		return false, fmt.Errorf("%s presented no certificate", addr)
	}
	if !peertls.Names(cert, id) {
		return false, fmt.Errorf("%s presented a certificate for %q, not for %q", addr, cert.Subject.CommonName, id)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/internal/whoami", bytes.NewReader([]byte("{}")))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := req.Write(conn); err != nil {
		return false, fmt.Errorf("whoami: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return false, fmt.Errorf("whoami: %w", err)
	}
	defer resp.Body.Close()
	var out peerrpc.Resp[whoami]
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("whoami: HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return false, fmt.Errorf("whoami: %w", err)
	}
	if out.Error != nil {
		return false, out.Error.Err()
	}
	if out.Value.ID != id {
		return false, fmt.Errorf("whoami: %s says it is %q, gossip says %q", addr, out.Value.ID, id)
	}
	return out.Value.Leaving, nil
}
