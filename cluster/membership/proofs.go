package membership

import (
	"sync"
	"time"
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
//
// Proofs keeps the record; the proving itself (dialling, the certificate,
// /internal/whoami) is package cluster's (Node.provePeers, peers.go).

// proofRetry spaces failed proofs of one member.
const proofRetry = 2 * time.Second

// Proofs records what members proved. Its methods are safe for
// concurrent use; a nil *Proofs (a node without cluster TLS) trusts
// gossip, as quorate did before TLS.
type Proofs struct {
	mu      sync.Mutex
	proven  map[string]string    // node id -> raft address its certificate answered at
	leaving map[string]bool      // node id -> said itself that it is leaving
	failed  map[string]time.Time // node id -> when its last proof failed
	proved  map[string]time.Time // node id -> when its last proof succeeded
}

func NewProofs() *Proofs {
	return &Proofs{proven: map[string]string{}, leaving: map[string]bool{}, failed: map[string]time.Time{}, proved: map[string]time.Time{}}
}

// Trusts reports whether member id proved itself at raft address addr.
func (p *Proofs) Trusts(id, addr string) bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return addr != "" && p.proven[id] == addr
}

// NeedsProof reports whether member mb should be (re)proved now: it is
// alive and not proven at its address, or it says it is leaving and has
// not confirmed it. A member that says it is not leaving loses an earlier
// confirmation, so a later forged flag is asked about again.
func (p *Proofs) NeedsProof(mb Member, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := mb.Meta.ID
	if !mb.Meta.Leaving {
		delete(p.leaving, id)
	}
	if mb.State != Alive || now.Sub(p.failed[id]) < proofRetry {
		return false
	}
	return p.proven[id] != mb.Meta.RaftAddr || (mb.Meta.Leaving && !p.leaving[id])
}

// Record stores the outcome of proving member id at addr.
func (p *Proofs) Record(id, addr string, leaving bool, err error, now time.Time) {
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

// Last returns when member id's last proof failed and succeeded (zero:
// never).
func (p *Proofs) Last(id string) (failed, proved time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed[id], p.proved[id]
}

// Trusted returns the members as placement may see them: unproven members
// in state "unproven", and a leaving flag (or a "left" state) only where
// the member confirmed it.
func (p *Proofs) Trusted(ms map[string]Member) map[string]Member {
	if p == nil {
		return ms
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, mb := range ms {
		confirmed := mb.Meta.Leaving && p.leaving[id]
		mb.Meta.Leaving = confirmed
		switch {
		case mb.State == Alive && (mb.Meta.RaftAddr == "" || p.proven[id] != mb.Meta.RaftAddr):
			mb.State = Unproven
		case mb.State == Left && !confirmed:
			mb.State = Dead // removed after DeadAfter, like a crash
		}
		ms[id] = mb
	}
	return ms
}
