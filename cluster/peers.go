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

	"github.com/quorate/quorate/transport/peertls"
	"github.com/quorate/quorate/transport/raftmux"
)

// Gossip finds nodes; it does not vouch for them. Even encrypted, gossip
// can carry what any holder of the gossip key says, about itself and (for
// a moment, until the node refutes it) about others: a member that does
// not exist, a real node's id with another address, a "leaving" flag a
// real node never set. So, with cluster TLS, placement acts only on what a
// member proved over the raft port's mutual TLS:
//
//   - A member is a candidate replica (and leader) only once this node has
//     dialled the raft address gossip gives for it and the certificate that
//     answered, signed by the cluster CA, names the member's node id
//     (peertls.Names). Until then placement sees it as neither alive nor
//     dead: it is never added as a voter, never counted for a majority, and
//     never removed for it.
//   - A member's "leaving" flag counts only once the member itself, asked
//     over that authenticated stream (/internal/whoami), says it is
//     leaving. A departure gossip announces without that confirmation
//     counts as a crash: the voter is removed after DeadAfter, not at once.
//
// A proof binds a node id to a raft address and is kept while gossip gives
// that address. What is left to trust is the certificate: any node holding
// one signed by the cluster CA can speak raft and the internal RPC, and
// can be placed under the id its certificate names.

const (
	// proofRetry spaces failed proofs of one member.
	proofRetry = 2 * time.Second
	// proofTimeout bounds one proof: dial, handshake, question and answer.
	proofTimeout = 2 * time.Second
)

// peerProofs records what members proved. Its methods are safe for
// concurrent use; a nil *peerProofs (a node without cluster TLS) trusts
// gossip, as quorate did before TLS.
type peerProofs struct {
	mu      sync.Mutex
	proven  map[string]string    // node id -> raft address its certificate answered at
	leaving map[string]bool      // node id -> said itself that it is leaving
	failed  map[string]time.Time // node id -> when its last proof failed
	proved  map[string]time.Time // node id -> when its last proof succeeded
}

func newPeerProofs() *peerProofs {
	return &peerProofs{proven: map[string]string{}, leaving: map[string]bool{}, failed: map[string]time.Time{}, proved: map[string]time.Time{}}
}

// trusts reports whether member id proved itself at raft address addr.
func (p *peerProofs) trusts(id, addr string) bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return addr != "" && p.proven[id] == addr
}

// needsProof reports whether member mb should be (re)proved now: it is
// alive and not proven at its address, or it says it is leaving and has
// not confirmed it. A member that says it is not leaving loses an earlier
// confirmation, so a later forged flag is asked about again.
func (p *peerProofs) needsProof(mb member, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := mb.meta.ID
	if !mb.meta.Leaving {
		delete(p.leaving, id)
	}
	if mb.state != memberAlive || now.Sub(p.failed[id]) < proofRetry {
		return false
	}
	return p.proven[id] != mb.meta.RaftAddr || (mb.meta.Leaving && !p.leaving[id])
}

// record stores the outcome of proving member id at addr.
func (p *peerProofs) record(id, addr string, leaving bool, err error, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failed[id] = now
		return
	}
	delete(p.failed, id)
	p.proved[id] = now
	p.proven[id] = addr
	p.leaving[id] = leaving
}

// last returns when member id's last proof failed and succeeded (zero:
// never).
func (p *peerProofs) last(id string) (failed, proved time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed[id], p.proved[id]
}

// view returns the members as placement may see them: unproven members
// in state "unproven", and a leaving flag (or a "left" state) only where
// the member confirmed it.
func (p *peerProofs) view(ms map[string]member) map[string]member {
	if p == nil {
		return ms
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, mb := range ms {
		confirmed := mb.meta.Leaving && p.leaving[id]
		mb.meta.Leaving = confirmed
		switch {
		case mb.state == memberAlive && (mb.meta.RaftAddr == "" || p.proven[id] != mb.meta.RaftAddr):
			mb.state = memberUnproven
		case mb.state == memberLeft && !confirmed:
			mb.state = memberDead // removed after DeadAfter, like a crash
		}
		ms[id] = mb
	}
	return ms
}

// trustedMembers is the membership placement acts on (see peerProofs).
func (n *Node) trustedMembers() map[string]member {
	return n.proofs.view(n.members.snapshot())
}

// provePeers proves, in parallel, every member that needs it. It runs on
// one goroutine (n.every), so a member is never proved twice at once.
func (n *Node) provePeers() {
	if n.proofs == nil {
		return
	}
	now := time.Now()
	var wg sync.WaitGroup
	for id, mb := range n.members.snapshot() {
		if !n.proofs.needsProof(mb, now) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), proofTimeout)
			defer cancel()
			leaving, err := n.prove(ctx, id, mb.meta.RaftAddr)
			n.proofs.record(id, mb.meta.RaftAddr, leaving, err, time.Now())
			if err != nil {
				n.logger.Warn("gossip member failed to prove its identity; it is not placed", "member", id, "raft", mb.meta.RaftAddr, "err", err)
				return
			}
			n.logger.Debug("gossip member proved its identity", "member", id, "raft", mb.meta.RaftAddr, "leaving", leaving)
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
	var out rpcResp[whoami]
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("whoami: HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return false, fmt.Errorf("whoami: %w", err)
	}
	if out.Error != nil {
		return false, out.Error.err()
	}
	if out.Value.ID != id {
		return false, fmt.Errorf("whoami: %s says it is %q, gossip says %q", addr, out.Value.ID, id)
	}
	return out.Value.Leaving, nil
}
