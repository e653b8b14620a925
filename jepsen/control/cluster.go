//go:build linux

package control

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorate/quorate/jepsen/netns"
)

// Ports every node listens on, at its own address.
const (
	HTTPPort   = 7070
	RaftPort   = 7071
	GossipPort = 7072
	DebugPort  = 7079
)

// Defaults for the zero values of Options.
const (
	DefaultPrefix = "qj"
	// DefaultClockSkew is inside the clock guard's tolerance (half of the
	// nodes' --max-clock-offset, 500 ms, from the median clock), so a
	// skewed node keeps stamping and the checkers judge the refill its
	// offset credits.
	DefaultClockSkew = 200 * time.Millisecond
	// DefaultFarClockOffset is clock-restart-ahead's offset: four times
	// the clock guard's tolerance at the nodes' default --max-clock-offset.
	DefaultFarClockOffset = 2 * time.Second
	DefaultStrobeInterval = 50 * time.Millisecond
	DefaultLeaderGroup    = "0"
	// defaultGroups is quorate serve's --groups default.
	defaultGroups = 8
)

// Errors returned by Cluster methods.
var (
	// ErrUnsupported means the fault needs network namespaces and the
	// cluster runs without them (see Supports).
	ErrUnsupported = errors.New("not supported without network namespaces")
	// ErrNotRunning means the node has no live process started by this Cluster.
	ErrNotRunning = errors.New("node not running")
	// ErrRunning means the node already has a live process.
	ErrRunning = errors.New("node already running")
	// ErrNoLeader means no live node reports itself leader of the group.
	ErrNoLeader = errors.New("no leader")
	// ErrTornDown means Teardown has run; the Cluster starts nothing more.
	ErrTornDown = errors.New("cluster torn down")
)

// Options configure a Cluster. They are read once, by New.
type Options struct {
	// Nodes is the cluster size: 3 or 5.
	Nodes int
	// Binary is a quorate binary built with -tags faultinject.
	Binary string
	// UpgradeBinary, if set, is the binary the upgrade-roll nemesis moves
	// the nodes to, one at a time (every node starts on Binary).
	UpgradeBinary string
	// WorkDir holds each node's data dir (WorkDir/nI) and log (WorkDir/nI.log).
	WorkDir string
	// Prefix names the namespaces: <Prefix>-br, <Prefix>-client,
	// <Prefix>-n1...; 1 to 8 of a-z and 0-9, starting with a letter.
	// Default "qj".
	Prefix string
	// ExtraArgs are appended to every node's serve command line, e.g.
	// "--groups", "8", "--raft-timeout", "200ms".
	ExtraArgs []string
	// Logger receives what the harness does; nil discards it.
	Logger *slog.Logger
	// UseNetns puts every node in its own network namespace. It is ignored
	// (with a warning) when the process is not root or ip is missing.
	UseNetns bool
	// Insecure runs the nodes with --insecure. By default Setup writes a
	// cluster CA, node certificates and a gossip key with the binary's
	// `certs init` into WorkDir/certs, and every node runs with them, as
	// production nodes should.
	Insecure bool

	// ClockSkew is D of the clock nemeses (offsets of ±D). Default 200ms.
	ClockSkew time.Duration
	// FarClockOffset is the offset clock-restart-ahead starts a node with,
	// beyond what the clock guard lets stamp. Default 2s.
	FarClockOffset time.Duration
	// StrobeInterval is how often clock-strobe flips the offset. Default 50ms.
	StrobeInterval time.Duration
	// LeaderGroup is the group whose leader kill-leader and
	// partition-leader target ("meta" or "0".."G-1"). Default "0".
	LeaderGroup string
}

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}$`)

// Cluster is a quorate cluster run by this process. Its methods may be
// called from several goroutines.
type Cluster struct {
	opts    Options
	useNS   bool
	log     *slog.Logger
	http    *http.Client
	voters  int
	groups  int // data groups (--groups in ExtraArgs, default 8)
	spawner spawner

	recorder recorder // has its own lock
	// token is the API token Setup made (see auth.go); nil before.
	token atomic.Pointer[string]

	// mu guards the fields below and each node's proc and paused.
	mu      sync.Mutex
	nodes   []*node // index 0 is node 1; the slice itself never changes
	torn    bool
	active  map[faultKind]string  // kind of fault -> name of the nemesis that started it
	offsets map[int]time.Duration // node -> current clock offset as last set
	maxSkew map[int]time.Duration // node -> largest |offset| ever set
	strobe  *strobe               // the running clock strobe, if any
}

type faultKind int

const (
	faultDown faultKind = iota // killed, stopped or left
	faultPause
	faultPartition
	faultClock
)

// node is one member's fixed layout and its current process.
type node struct {
	index int
	id    string // nI
	ip    string
	proc  *proc
	// paused is set between Pause and Resume of the current process.
	paused bool
	// upgraded is set once upgrade-roll picked the node: from then on it
	// starts on Options.UpgradeBinary; upgradedAt is when it first did.
	upgraded   bool
	upgradedAt time.Time
	// startOffset is the clock offset the node's next process starts with
	// (see StartAhead).
	startOffset time.Duration
}

// New checks opts and returns a Cluster. It changes nothing on the
// machine; call Setup next.
func New(opts Options) (*Cluster, error) {
	if opts.Nodes != 3 && opts.Nodes != 5 {
		return nil, fmt.Errorf("control: Nodes must be 3 or 5, got %d", opts.Nodes)
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !prefixRE.MatchString(opts.Prefix) {
		return nil, fmt.Errorf("control: Prefix %q: want 1 to 8 of a-z and 0-9, starting with a letter", opts.Prefix)
	}
	if opts.Binary == "" {
		return nil, errors.New("control: Binary is required (a quorate binary built with -tags faultinject)")
	}
	bin, err := filepath.Abs(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("control: Binary: %w", err)
	}
	if st, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("control: Binary: %w", err)
	} else if st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("control: Binary %s is not an executable file", bin)
	}
	opts.Binary = bin
	opts.ExtraArgs = slices.Clone(opts.ExtraArgs)
	if opts.WorkDir == "" {
		return nil, errors.New("control: WorkDir is required")
	}
	if opts.WorkDir, err = filepath.Abs(opts.WorkDir); err != nil {
		return nil, fmt.Errorf("control: WorkDir: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ClockSkew <= 0 {
		opts.ClockSkew = DefaultClockSkew
	}
	if opts.FarClockOffset <= 0 {
		opts.FarClockOffset = DefaultFarClockOffset
	}
	if opts.StrobeInterval <= 0 {
		opts.StrobeInterval = DefaultStrobeInterval
	}
	if opts.LeaderGroup == "" {
		opts.LeaderGroup = DefaultLeaderGroup
	}
	voters, err := votersPerGroup(opts.ExtraArgs, opts.Nodes)
	if err != nil {
		return nil, fmt.Errorf("control: ExtraArgs: %w", err)
	}
	groups, err := intFlag(opts.ExtraArgs, "groups", defaultGroups)
	if err != nil {
		return nil, fmt.Errorf("control: ExtraArgs: %w", err)
	}

	c := &Cluster{
		opts:    opts,
		log:     opts.Logger,
		voters:  voters,
		groups:  groups,
		active:  map[faultKind]string{},
		offsets: map[int]time.Duration{},
		maxSkew: map[int]time.Duration{},
	}
	c.recorder.now = time.Now
	if opts.UseNetns {
		switch _, ipErr := exec.LookPath("ip"); {
		case os.Geteuid() != 0:
			c.log.Warn("not root: running without network namespaces; partitions are unsupported")
		case ipErr != nil:
			c.log.Warn("iproute2's ip not found: running without network namespaces; partitions are unsupported")
		default:
			c.useNS = true
		}
	}
	for i := 1; i <= opts.Nodes; i++ {
		c.nodes = append(c.nodes, &node{index: i, id: nodeID(i), ip: c.nodeIP(i)})
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	if c.useNS {
		tr.DialContext = netns.Dialer(netns.Path(c.ClientNS()))
	}
	c.http = &http.Client{Transport: bearer{tr, c}}
	return c, nil
}

// votersPerGroup is min(--replicas, nodes), --replicas taken from the
// extra serve flags (default 3).
func votersPerGroup(extra []string, nodes int) (int, error) {
	replicas, err := intFlag(extra, "replicas", 3)
	return min(replicas, nodes), err
}

// intFlag returns the last value of the serve flag name (--name v,
// -name v, --name=v or -name=v) in extra, def if it is absent; the value
// must be a positive integer.
func intFlag(extra []string, name string, def int) (int, error) {
	n := def
	for i, a := range extra {
		var v string
		switch {
		case a == "--"+name || a == "-"+name:
			if i+1 >= len(extra) {
				return 0, fmt.Errorf("--%s without a value", name)
			}
			v = extra[i+1]
		case strings.HasPrefix(a, "--"+name+"="):
			v = a[len(name)+3:]
		case strings.HasPrefix(a, "-"+name+"="):
			v = a[len(name)+2:]
		default:
			continue
		}
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			return 0, fmt.Errorf("--%s %q: want a positive integer", name, v)
		}
		n = k
	}
	return n, nil
}

func nodeID(i int) string { return "n" + strconv.Itoa(i) }

// Nodes is the cluster size.
func (c *Cluster) Nodes() int { return c.opts.Nodes }

// UsesNetns reports whether the nodes run in network namespaces.
func (c *Cluster) UsesNetns() bool { return c.useNS }

// HTTPClient is the client the Cluster uses for the nodes' APIs; it sends
// the run's admin token (auth.go). With namespaces it creates its sockets
// inside <prefix>-client, so it works from whichever namespace the harness
// runs in.
func (c *Cluster) HTTPClient() *http.Client { return c.http }

// NodeID is node i's --node-id: "n1", "n2", ...
func (c *Cluster) NodeID(i int) string { return nodeID(i) }

// NodeIP is node i's address: 10.77.0.1i with namespaces, 127.0.0.1i without.
func (c *Cluster) NodeIP(i int) string { return c.nodeIP(i) }

func (c *Cluster) nodeIP(i int) string {
	if c.useNS {
		return fmt.Sprintf("10.77.0.%d", 10+i)
	}
	return fmt.Sprintf("127.0.0.%d", 10+i)
}

// ClientIP is the client namespace's address (10.77.0.100); "" without namespaces.
func (c *Cluster) ClientIP() string {
	if c.useNS {
		return "10.77.0.100"
	}
	return ""
}

// NodeURL is node i's HTTP API: http://ip:7070.
func (c *Cluster) NodeURL(i int) string {
	return fmt.Sprintf("http://%s:%d", c.nodeIP(i), HTTPPort)
}

// DebugURL is node i's debug listener: http://ip:7079.
func (c *Cluster) DebugURL(i int) string {
	return fmt.Sprintf("http://%s:%d", c.nodeIP(i), DebugPort)
}

// NodeNS is node i's namespace name, <prefix>-nI ("" without namespaces).
func (c *Cluster) NodeNS(i int) string {
	if !c.useNS {
		return ""
	}
	return c.opts.Prefix + "-" + nodeID(i)
}

// ClientNS is the client namespace's name, <prefix>-client ("" without namespaces).
func (c *Cluster) ClientNS() string {
	if !c.useNS {
		return ""
	}
	return c.opts.Prefix + "-client"
}

// BridgeNS is the bridge namespace's name, <prefix>-br ("" without namespaces).
func (c *Cluster) BridgeNS() string {
	if !c.useNS {
		return ""
	}
	return c.opts.Prefix + "-br"
}

// DataDir is node i's --data-dir.
func (c *Cluster) DataDir(i int) string { return filepath.Join(c.opts.WorkDir, nodeID(i)) }

// LogPath is the file node i's output is appended to.
func (c *Cluster) LogPath(i int) string { return filepath.Join(c.opts.WorkDir, nodeID(i)+".log") }

func (c *Cluster) node(i int) (*node, error) {
	if i < 1 || i > len(c.nodes) {
		return nil, fmt.Errorf("control: no node %d (nodes are 1..%d)", i, len(c.nodes))
	}
	return c.nodes[i-1], nil
}

// Nemesis names accepted by Mix and Supports.
const (
	NemKill              = "kill"
	NemKillLeader        = "kill-leader"
	NemKillMinority      = "kill-minority"
	NemPause             = "pause"
	NemPartitionOne      = "partition-one"
	NemPartitionLeader   = "partition-leader"
	NemPartitionHalves   = "partition-halves"
	NemPartitionRing     = "partition-ring"
	NemPartitionBridge   = "partition-bridge"
	NemClockBump         = "clock-bump"
	NemClockStrobe       = "clock-strobe"
	NemLeaveRejoin       = "leave-rejoin"
	NemTermLeader        = "term-leader"
	NemUpgradeRoll       = "upgrade-roll"
	NemClockRestartAhead = "clock-restart-ahead"
	NemClockJumpAhead    = "clock-jump-ahead"
)

// NemesisNames lists every nemesis name Mix knows, in a fixed order.
func NemesisNames() []string {
	return []string{
		NemKill, NemKillLeader, NemKillMinority, NemPause,
		NemPartitionOne, NemPartitionLeader, NemPartitionHalves, NemPartitionRing, NemPartitionBridge,
		NemClockBump, NemClockStrobe, NemClockRestartAhead, NemClockJumpAhead, NemLeaveRejoin, NemTermLeader, NemUpgradeRoll,
	}
}

// Supports reports whether the nemesis named kind can run on this cluster.
// Without namespaces every partition is unsupported (there is no network of
// our own to cut, and the root namespace is never touched); process faults
// (kill, pause, leave-rejoin) and clock skew work in both modes.
// partition-ring needs 5 nodes (with 3, no two nodes could see different
// majorities through symmetric cuts).
func (c *Cluster) Supports(kind string) bool {
	switch kind {
	case NemKill, NemKillLeader, NemKillMinority, NemPause, NemClockBump, NemClockStrobe, NemClockRestartAhead, NemClockJumpAhead, NemLeaveRejoin, NemTermLeader:
		return true
	case NemPartitionOne, NemPartitionLeader, NemPartitionHalves, NemPartitionBridge:
		return c.useNS
	case NemPartitionRing:
		return c.useNS && c.opts.Nodes == 5
	case NemUpgradeRoll:
		return c.opts.UpgradeBinary != ""
	}
	return false
}
