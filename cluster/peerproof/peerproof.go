// Package peerproof proves gossip members: a member is placed only once it
// has shown, over mutual TLS on the raft port, a cluster certificate that
// names the node id it gossips, and said on that stream who it is and
// whether it is leaving (/internal/whoami). What each member proved is
// recorded in membership.Proofs, which placement trusts.
package peerproof

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/quorate/quorate/cluster/membership"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/transport/peertls"
	"github.com/quorate/quorate/transport/raftmux"
)

// timeout bounds one proof: dial, handshake, question and answer.
const timeout = 2 * time.Second

// Dialer dials a peer's internal RPC stream.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Whoami is what a node answers about itself on /internal/whoami.
type Whoami struct {
	ID      string `json:"id"`
	Leaving bool   `json:"leaving"`
}

// Prover proves, in parallel, every member that needs it (Run).
type Prover struct {
	// Dial dials a member's internal RPC over mutual TLS.
	Dial Dialer
	// Proofs records what each member proved.
	Proofs *membership.Proofs
	// Members returns gossip's members, proven or not.
	Members func() map[string]membership.Member
	// OnProved is called after each member that proved its identity.
	OnProved func()
	// Logger receives each proof's outcome.
	Logger *slog.Logger
}

// Run proves every member that needs it (membership.Proofs.NeedsProof)
// and records the outcome. It runs on one goroutine, so a member is never
// proved twice at once.
func (p *Prover) Run() {
	now := time.Now()
	var wg sync.WaitGroup
	for id, mb := range p.Members() {
		if !p.Proofs.NeedsProof(mb, now) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			leaving, err := Prove(ctx, p.Dial, id, mb.Meta.RaftAddr)
			p.Proofs.Record(id, mb.Meta.RaftAddr, leaving, err, time.Now())
			if err != nil {
				p.Logger.Warn("gossip member failed to prove its identity; it is not placed", "member", id, "raft", mb.Meta.RaftAddr, "err", err)
				return
			}
			p.Logger.Debug("gossip member proved its identity", "member", id, "raft", mb.Meta.RaftAddr, "leaving", leaving)
			p.OnProved()
		}()
	}
	wg.Wait()
}

// Prove dials addr's internal RPC over mutual TLS (dial is the node's
// "rpc" stream layer), checks that the certificate that answered names node
// id, and asks that node, on the same authenticated stream, who it is and
// whether it is leaving.
func Prove(ctx context.Context, dial Dialer, id, addr string) (leaving bool, err error) {
	if addr == "" {
		return false, fmt.Errorf("no raft address in its gossip metadata")
	}
	conn, err := dial(ctx, "tcp", addr)
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
	var out peerrpc.Resp[Whoami]
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
