// Package membership knows who is in the cluster and where each group's
// replicas and leader belong: memberlist gossip of every node's metadata
// (Gossip, Meta, typed member states), the proofs that make a gossip member
// trusted under cluster TLS (Proofs), and placement planning
// (PreferredLeaders, PlanPlacement), which is pure: package cluster's placer
// applies the steps it plans to the raft groups.
package membership

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Meta is what a node gossips about itself. It must fit memberlist's
// 512-byte metadata limit: led groups are a bitmap, not a list.
type Meta struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft"`
	HTTPAddr string `json:"http"`
	// Groups is the node's number of data groups: nodes that disagree on it
	// would route clients to different groups, so gossip refuses them (zero:
	// a node from before the field, accepted).
	Groups int `json:"groups,omitempty"`
	// Leaving is set before a graceful leave, so that others can tell a
	// departure from a crash.
	Leaving bool `json:"leaving,omitempty"`
	// Leads is a base64 bitmap of the data groups this node leads and
	// serves; bit G is the meta group.
	Leads string `json:"leads,omitempty"`
	// ClockOff says this node's clock is not known to be in bounds (off, or
	// not yet checked since the node started): it must not lead, and its
	// clock is no reference for others' (see clock.Guard).
	ClockOff bool `json:"clock_off,omitempty"`
	// Version is the node's binary version, and MaxClusterVersion the
	// highest cluster version it can run (zero: a node of the release before
	// cluster versions, which runs only the base version).
	Version           string `json:"version,omitempty"`
	MaxClusterVersion uint32 `json:"max_cv,omitempty"`
}

// State is what this node knows of another node's liveness.
type State string

// Member states. Unproven is only ever seen through Proofs.Trusted.
const (
	Alive    State = "alive"    // gossip reaches it
	Dead     State = "dead"     // gossip lost it without a goodbye
	Left     State = "left"     // it said it was leaving, then went
	Unproven State = "unproven" // alive, but never proved its node id with a cluster certificate
	// Leaving is how a status report shows an Alive member whose Meta says
	// it is leaving; a Member's State is never Leaving.
	Leaving State = "leaving"
)

// Member is one node as this node last saw it.
type Member struct {
	Meta   Meta
	State  State
	Since  time.Time // when it entered State
	Leads  []bool    // the groups it serves, by index (bit G: the meta group)
	gossip string    // the member's gossip address, to reconnect to it
}

// Gossip tracks the cluster's nodes through memberlist gossip.
type Gossip struct {
	logger   *slog.Logger
	ml       *memberlist.Memberlist
	trans    *boundedTransport
	groups   int
	onChange func()

	mu      sync.Mutex
	self    Meta
	members map[string]*Member
	refused error // see incompatible
}

// Config configures gossip.
type Config struct {
	NodeID, RaftAddr, HTTPAddr, GossipAddr string
	Groups                                 int
	Keys                                   [][]byte // gossip keyring, primary first; none: plaintext
	Logger                                 *slog.Logger
	// ClockOff is this node's ClockOff at start (see Meta.ClockOff).
	ClockOff bool
	// Version and MaxClusterVersion: see Meta.
	Version           string
	MaxClusterVersion uint32
	OnChange          func() // called after every member update; must not block
}

func New(c Config) (*Gossip, error) {
	host, portStr, err := net.SplitHostPort(c.GossipAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", c.GossipAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", c.GossipAddr, err)
	}
	m := &Gossip{
		logger:   c.Logger.With("component", "membership"),
		groups:   c.Groups,
		onChange: c.OnChange,
		self: Meta{ID: c.NodeID, RaftAddr: c.RaftAddr, HTTPAddr: c.HTTPAddr, Groups: c.Groups, ClockOff: c.ClockOff,
			Version: c.Version, MaxClusterVersion: c.MaxClusterVersion},
		members: map[string]*Member{},
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.NodeID
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = host, port
	// Failure detection in a few seconds instead of memberlist's ~6 s, but
	// not so tight that a busy node is declared dead: raft elections do not
	// depend on it, only replica replacement (after DeadAfter) and leader
	// discovery by nodes without a replica do. Dead members are rejoined
	// by reconnect, as serf does, since memberlist never retries them.
	mc.ProbeInterval = 500 * time.Millisecond
	mc.ProbeTimeout = 300 * time.Millisecond
	mc.SuspicionMult = 4
	mc.GossipInterval = 200 * time.Millisecond
	mc.PushPullInterval = 5 * time.Second
	// Our messages are a few hundred bytes: compressing each one (LZW)
	// cost more idle CPU than it saved.
	mc.EnableCompression = false
	mc.Delegate = m
	mc.Events = m
	mc.Merge = m
	mc.Alive = m
	mc.Logger = slog.NewLogLogger(m.logger.Handler(), slog.LevelDebug)
	if len(c.Keys) > 0 {
		// Every message is encrypted with the first key and must decrypt
		// with one of them (memberlist's GossipVerifyIncoming/Outgoing
		// default to true): a node without the key can neither join nor
		// be heard.
		kr, err := memberlist.NewKeyring(c.Keys, c.Keys[0])
		if err != nil {
			return nil, fmt.Errorf("gossip key: %w", err)
		}
		mc.Keyring = kr
	}
	if m.trans, err = newBoundedTransport(host, port, mc.Logger); err != nil {
		return nil, err
	}
	mc.Transport = m.trans
	if port == 0 { // memberlist learns a bound port only from a transport of its own
		mc.BindPort = m.trans.GetAutoBindPort()
		mc.AdvertisePort = mc.BindPort
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = m.trans.Shutdown()
		return nil, fmt.Errorf("gossip: %w", err)
	}
	m.ml = ml
	return m, nil
}

// Join contacts the given gossip addresses; it succeeds if any answers.
func (m *Gossip) Join(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	n, err := m.ml.Join(addrs)
	if n == 0 {
		return fmt.Errorf("join %v: %w", addrs, err)
	}
	return nil
}

// SetLeads publishes which groups this node leads.
func (m *Gossip) SetLeads(leads []bool) {
	enc := encodeBitmap(leads)
	m.publish(func(self *Meta) { self.Leads = enc })
}

// SetClockOff publishes whether this node's clock is out of bounds.
func (m *Gossip) SetClockOff(off bool) {
	m.publish(func(self *Meta) { self.ClockOff = off })
}

// SetLeaving publishes that this node is leaving on purpose.
func (m *Gossip) SetLeaving() {
	m.publish(func(self *Meta) { self.Leaving = true })
}

// publish applies change to this node's metadata and gossips it, if it
// changed anything.
func (m *Gossip) publish(change func(self *Meta)) {
	m.mu.Lock()
	before := m.self
	change(&m.self)
	changed := m.self != before
	m.mu.Unlock()
	if changed {
		if err := m.ml.UpdateNode(time.Second); err != nil {
			m.logger.Debug("gossip update", "err", err)
		}
	}
}

// Leave announces this node's departure to the other members.
func (m *Gossip) Leave(timeout time.Duration) error {
	err := m.ml.Leave(timeout)
	return err
}

// Shutdown stops gossiping, without a goodbye.
func (m *Gossip) Shutdown() error { return m.ml.Shutdown() }

// StreamStats returns what the gossip port did with incoming streams.
func (m *Gossip) StreamStats() StreamStats { return m.trans.Stats() }

// Addr returns the address this node gossips on.
func (m *Gossip) Addr() string { return m.ml.LocalNode().Address() }

// Reconnect tries to rejoin every member believed dead (not those that
// left). A node declared dead by mistake (a pause, a partition, a busy
// machine) and alive again is found within one call; memberlist itself
// stops talking to dead nodes, so without this two sides of a healed
// partition could each think the other dead for good.
func (m *Gossip) Reconnect() {
	m.mu.Lock()
	var addrs []string
	for _, mb := range m.members {
		if mb.State == Dead && mb.gossip != "" {
			addrs = append(addrs, mb.gossip)
		}
	}
	m.mu.Unlock()
	if len(addrs) == 0 {
		return
	}
	if n, err := m.ml.Join(addrs); err != nil && n == 0 {
		m.logger.Debug("reconnect to dead members failed", "members", addrs, "err", err)
	}
}

// Snapshot returns a copy of every member but this node, by id.
func (m *Gossip) Snapshot() map[string]Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Member, len(m.members))
	for id, mb := range m.members {
		out[id] = *mb
	}
	return out
}

// NodeMeta implements memberlist.Delegate.
func (m *Gossip) NodeMeta(limit int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, _ := json.Marshal(m.self)
	if len(b) > limit {
		m.logger.Error("node metadata over the gossip limit; leaders will not be advertised", "bytes", len(b), "limit", limit)
		s := m.self
		s.Leads = ""
		b, _ = json.Marshal(s)
	}
	return b
}

// NotifyMsg, GetBroadcasts, LocalState and MergeRemoteState implement
// memberlist.Delegate; quorate gossips only node metadata.
func (m *Gossip) NotifyMsg([]byte)                           {}
func (m *Gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (m *Gossip) LocalState(join bool) []byte                { return nil }
func (m *Gossip) MergeRemoteState(buf []byte, join bool)     {}

// NotifyJoin implements memberlist.EventDelegate.
func (m *Gossip) NotifyJoin(n *memberlist.Node) { m.update(n, Alive) }

// NotifyUpdate implements memberlist.EventDelegate.
func (m *Gossip) NotifyUpdate(n *memberlist.Node) { m.update(n, Alive) }

// NotifyMerge implements memberlist.MergeDelegate: a join with a cluster
// whose nodes have another group count fails, on both sides.
func (m *Gossip) NotifyMerge(peers []*memberlist.Node) error {
	for _, p := range peers {
		if err := m.compatible(p); err != nil {
			m.mu.Lock()
			m.refused = err
			m.mu.Unlock()
			return err
		}
	}
	return nil
}

// NotifyAlive implements memberlist.AliveDelegate: a node with another
// group count is kept out of the member list.
func (m *Gossip) NotifyAlive(p *memberlist.Node) error { return m.compatible(p) }

func (m *Gossip) compatible(p *memberlist.Node) error {
	var meta Meta
	if json.Unmarshal(p.Meta, &meta) != nil || meta.Groups == 0 || meta.Groups == m.groups {
		return nil // unreadable metadata is update's to ignore
	}
	err := &GroupCountError{Node: meta.ID, Theirs: meta.Groups, Ours: m.groups}
	m.logger.Warn("refusing gossip member", "err", err)
	return err
}

// GroupCountError is the refusal of a member whose group count differs
// from this node's.
type GroupCountError struct {
	Node         string // the member refused
	Theirs, Ours int    // its group count and this node's
}

func (e *GroupCountError) Error() string {
	return fmt.Sprintf("node %s has %d data groups and this node %d: a cluster's group count is fixed when it is created, so start this node with --groups %d and a fresh data dir",
		e.Node, e.Theirs, e.Ours, e.Theirs)
}

// Incompatible returns the refusal of a push/pull merge with members of
// another group count since the last call, if any, and forgets it.
func (m *Gossip) Incompatible() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.refused
	m.refused = nil
	return err
}

// NotifyLeave implements memberlist.EventDelegate. It fires for crashes and
// departures alike; the Leaving flag tells them apart.
func (m *Gossip) NotifyLeave(n *memberlist.Node) { m.update(n, Dead) }

func (m *Gossip) update(n *memberlist.Node, state State) {
	var meta Meta
	if err := json.Unmarshal(n.Meta, &meta); err != nil || meta.ID == "" {
		m.logger.Warn("ignoring gossip member with unreadable metadata", "name", n.Name, "err", err)
		return
	}
	if meta.ID == m.self.ID {
		return
	}
	if state == Dead && meta.Leaving {
		state = Left
	}
	m.mu.Lock()
	mb, ok := m.members[meta.ID]
	if !ok {
		mb = &Member{}
		m.members[meta.ID] = mb
	}
	stateChanged := mb.State != state
	if stateChanged {
		mb.State, mb.Since = state, time.Now()
	}
	mb.Meta = meta
	mb.Leads = decodeBitmap(meta.Leads, m.groups+1)
	mb.gossip = n.Address()
	m.mu.Unlock()
	if stateChanged {
		m.logger.Info("member", "node", meta.ID, "state", state, "raft", meta.RaftAddr, "http", meta.HTTPAddr)
	}
	if m.onChange != nil {
		m.onChange()
	}
}

// SortedIDs returns the ids of members in state (any state if empty).
func SortedIDs(ms map[string]Member, state State) []string {
	var ids []string
	for id, mb := range ms {
		if state == "" || mb.State == state {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func encodeBitmap(bits []bool) string {
	b := make([]byte, (len(bits)+7)/8)
	any := false
	for i, v := range bits {
		if v {
			b[i/8] |= 1 << (i % 8)
			any = true
		}
	}
	if !any {
		return ""
	}
	return base64.RawStdEncoding.EncodeToString(b)
}

func decodeBitmap(s string, n int) []bool {
	out := make([]bool, n)
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		return out
	}
	for i := range n {
		if i/8 < len(b) && b[i/8]&(1<<(i%8)) != 0 {
			out[i] = true
		}
	}
	return out
}
