package cluster

import (
	"context"

	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerproof"
)

// trustedMembers is the membership placement acts on (see
// membership.Proofs, which also says why).
func (n *Node) trustedMembers() map[string]membership.Member {
	return n.proofs.Trusted(n.members.Snapshot())
}

// provePeers proves every member that needs it (peerproof.Prover), over
// the "rpc" stream layer; without cluster TLS there is nothing to prove.
func (n *Node) provePeers() {
	if n.proofs == nil {
		return
	}
	p := peerproof.Prover{
		Dial:     n.rpcLn.DialContext,
		Proofs:   n.proofs,
		Members:  n.members.Snapshot,
		OnProved: func() { kick(n.placementCh) },
		Logger:   n.logger,
	}
	p.Run()
}

// whoami is /internal/whoami: this node's id and whether it is leaving, as
// a prover asks them on the stream it authenticated.
func (n *Node) whoami(context.Context, struct{}) (peerproof.Whoami, error) {
	return peerproof.Whoami{ID: n.opts.NodeID, Leaving: n.leaving.Load()}, nil
}
