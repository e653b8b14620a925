package cluster

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

// nodeMeta is what a node gossips about itself. It must fit memberlist's
// 512-byte metadata limit: led groups are a bitmap, not a list.
type nodeMeta struct {
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
	// ClockOff says this node's clock is further than MaxClockOffset from
	// most of its peers': it must not lead (see checkClocks).
	ClockOff bool `json:"clock_off,omitempty"`
}

// memberState is what this node knows of another node's liveness.
type memberState string

// Member states. unproven is only ever seen through peerProofs.view.
const (
	memberAlive    memberState = "alive"    // gossip reaches it
	memberDead     memberState = "dead"     // gossip lost it without a goodbye
	memberLeft     memberState = "left"     // it said it was leaving, then went
	memberUnproven memberState = "unproven" // alive, but never proved its node id with a cluster certificate
)

// member is one node as this node last saw it.
type member struct {
	meta   nodeMeta
	state  memberState
	since  time.Time // when it entered state
	leads  []bool
	gossip string // the member's gossip address, to reconnect to it
}

// membership tracks the cluster's nodes through memberlist gossip.
type membership struct {
	logger   *slog.Logger
	ml       *memberlist.Memberlist
	groups   int
	onChange func()

	mu      sync.Mutex
	self    nodeMeta
	members map[string]*member
	refused error // see incompatible
}

// membershipConfig configures gossip.
type membershipConfig struct {
	nodeID, raftAddr, httpAddr, gossipAddr string
	groups                                 int
	keys                                   [][]byte // gossip keyring, primary first; none: plaintext
	logger                                 *slog.Logger
	onChange                               func()
}

func newMembership(c membershipConfig) (*membership, error) {
	host, portStr, err := net.SplitHostPort(c.gossipAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", c.gossipAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", c.gossipAddr, err)
	}
	m := &membership{
		logger:   c.logger.With("component", "membership"),
		groups:   c.groups,
		onChange: c.onChange,
		self:     nodeMeta{ID: c.nodeID, RaftAddr: c.raftAddr, HTTPAddr: c.httpAddr, Groups: c.groups},
		members:  map[string]*member{},
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.nodeID
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
	mc.GossipInterval = 100 * time.Millisecond
	mc.PushPullInterval = 5 * time.Second
	mc.Delegate = m
	mc.Events = m
	mc.Merge = m
	mc.Alive = m
	mc.Logger = slog.NewLogLogger(m.logger.Handler(), slog.LevelDebug)
	if len(c.keys) > 0 {
		// Every message is encrypted with the first key and must decrypt
		// with one of them (memberlist's GossipVerifyIncoming/Outgoing
		// default to true): a node without the key can neither join nor
		// be heard.
		kr, err := memberlist.NewKeyring(c.keys, c.keys[0])
		if err != nil {
			return nil, fmt.Errorf("gossip key: %w", err)
		}
		mc.Keyring = kr
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("gossip: %w", err)
	}
	m.ml = ml
	return m, nil
}

// join contacts the given gossip addresses; it succeeds if any answers.
func (m *membership) join(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	n, err := m.ml.Join(addrs)
	if n == 0 {
		return fmt.Errorf("join %v: %w", addrs, err)
	}
	return nil
}

// setLeads publishes which groups this node leads.
func (m *membership) setLeads(leads []bool) {
	enc := encodeBitmap(leads)
	m.publish(func(self *nodeMeta) { self.Leads = enc })
}

// setClockOff publishes whether this node's clock is out of bounds.
func (m *membership) setClockOff(off bool) {
	m.publish(func(self *nodeMeta) { self.ClockOff = off })
}

// setLeaving publishes that this node is leaving on purpose.
func (m *membership) setLeaving() {
	m.publish(func(self *nodeMeta) { self.Leaving = true })
}

// publish applies change to this node's metadata and gossips it, if it
// changed anything.
func (m *membership) publish(change func(self *nodeMeta)) {
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

func (m *membership) leave(timeout time.Duration) error {
	err := m.ml.Leave(timeout)
	return err
}

func (m *membership) shutdown() error { return m.ml.Shutdown() }

// reconnect tries to rejoin every member believed dead (not those that
// left). A node declared dead by mistake (a pause, a partition, a busy
// machine) and alive again is found within one call; memberlist itself
// stops talking to dead nodes, so without this two sides of a healed
// partition could each think the other dead for good.
func (m *membership) reconnect() {
	m.mu.Lock()
	var addrs []string
	for _, mb := range m.members {
		if mb.state == memberDead && mb.gossip != "" {
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

// snapshot returns a copy of every member but this node, by id.
func (m *membership) snapshot() map[string]member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]member, len(m.members))
	for id, mb := range m.members {
		out[id] = *mb
	}
	return out
}

// NodeMeta implements memberlist.Delegate.
func (m *membership) NodeMeta(limit int) []byte {
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
func (m *membership) NotifyMsg([]byte)                           {}
func (m *membership) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (m *membership) LocalState(join bool) []byte                { return nil }
func (m *membership) MergeRemoteState(buf []byte, join bool)     {}

// NotifyJoin implements memberlist.EventDelegate.
func (m *membership) NotifyJoin(n *memberlist.Node) { m.update(n, memberAlive) }

// NotifyUpdate implements memberlist.EventDelegate.
func (m *membership) NotifyUpdate(n *memberlist.Node) { m.update(n, memberAlive) }

// NotifyMerge implements memberlist.MergeDelegate: a join with a cluster
// whose nodes have another group count fails, on both sides.
func (m *membership) NotifyMerge(peers []*memberlist.Node) error {
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
func (m *membership) NotifyAlive(p *memberlist.Node) error { return m.compatible(p) }

func (m *membership) compatible(p *memberlist.Node) error {
	var meta nodeMeta
	if json.Unmarshal(p.Meta, &meta) != nil || meta.Groups == 0 || meta.Groups == m.groups {
		return nil // unreadable metadata is update's to ignore
	}
	err := fmt.Errorf("node %s has %d data groups and this node %d: a cluster's group count is fixed when it is created, so start this node with --groups %d and a fresh data dir",
		meta.ID, meta.Groups, m.groups, meta.Groups)
	m.logger.Warn("refusing gossip member", "err", err)
	return err
}

// incompatible returns the refusal of a push/pull merge with members of
// another group count since the last call, if any, and forgets it.
func (m *membership) incompatible() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.refused
	m.refused = nil
	return err
}

// NotifyLeave implements memberlist.EventDelegate. It fires for crashes and
// departures alike; the Leaving flag tells them apart.
func (m *membership) NotifyLeave(n *memberlist.Node) { m.update(n, memberDead) }

func (m *membership) update(n *memberlist.Node, state memberState) {
	var meta nodeMeta
	if err := json.Unmarshal(n.Meta, &meta); err != nil || meta.ID == "" {
		m.logger.Warn("ignoring gossip member with unreadable metadata", "name", n.Name, "err", err)
		return
	}
	if meta.ID == m.self.ID {
		return
	}
	if state == memberDead && meta.Leaving {
		state = memberLeft
	}
	m.mu.Lock()
	mb, ok := m.members[meta.ID]
	if !ok {
		mb = &member{}
		m.members[meta.ID] = mb
	}
	stateChanged := mb.state != state
	if stateChanged {
		mb.state, mb.since = state, time.Now()
	}
	mb.meta = meta
	mb.leads = decodeBitmap(meta.Leads, m.groups+1)
	mb.gossip = n.Address()
	m.mu.Unlock()
	if stateChanged {
		m.logger.Info("member", "node", meta.ID, "state", state, "raft", meta.RaftAddr, "http", meta.HTTPAddr)
	}
	if m.onChange != nil {
		m.onChange()
	}
}

// sortedIDs returns the ids of members in state (any state if empty).
func sortedIDs(ms map[string]member, state memberState) []string {
	var ids []string
	for id, mb := range ms {
		if state == "" || mb.state == state {
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
