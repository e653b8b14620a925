// Package metrics is a node's Prometheus collector: batch sizes observed
// as entries are built, calls refused by reason, and, read at scrape time,
// every group's raft state, the disk, clock and memory guards' readings and
// the raft port's streams and traffic (port.go). It reads the node through
// what Source hands it and changes nothing.
package metrics

import (
	"errors"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorate/quorate/cluster/clock"
	"github.com/quorate/quorate/cluster/diskguard"
	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/memlimit"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/cluster/raftgroup"
	"github.com/quorate/quorate/transport/raftmux"
	"github.com/quorate/quorate/transport/raftnet"
)

// Source is what the collector reads of its node at scrape time. Groups
// returns the meta group first (nil before it is open: nothing is
// collected then); Syncs is called only once the groups are open.
type Source struct {
	// Groups returns every group, the meta group first.
	Groups func() []*raftgroup.Group
	Status func(*raftgroup.Group) peerrpc.WireGroupStatus // a group as this node's replica sees it
	Syncs  func() uint64                                  // durable commits of the node's raft log
	Clock  clock.Clock                                    // the stamp clock (a *clock.Stamp reports how far it holds back)
	Guard  *clock.Guard                                   // the verdict on the node's clock
	Disk   *diskguard.Guard                               // the data dir's free space
	Memory *memlimit.Budget                               // the memory budget
}

// Collector is the node's Prometheus metrics: batch sizes observed as
// entries are built, and raft state read from every group at scrape time.
type Collector struct {
	src       Source
	batchSize prometheus.Histogram
	syncs     *prometheus.Desc
	state     *prometheus.Desc
	term      *prometheus.Desc
	applied   *prometheus.Desc
	commit    *prometheus.Desc
	buckets   *prometheus.Desc
	version   *prometheus.Desc
	evicted   *prometheus.Desc
	remember  *prometheus.Desc
	heldBack  *prometheus.Desc
	refusals  *prometheus.CounterVec
	diskFree  *prometheus.Desc
	diskLow   *prometheus.Desc
	clockSkew *prometheus.Desc
	clockOff  *prometheus.Desc
	memLive   *prometheus.Desc
	memBudget *prometheus.Desc
	memShed   *prometheus.Desc
}

// New returns the collector of the node src reads.
func New(src Source) *Collector {
	m := &Collector{
		src: src,
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "quorate_raft_entry_decisions",
			Help:    "Decisions carried by each allow log entry this node proposed (group commit batch size).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		syncs: prometheus.NewDesc("quorate_log_syncs_total",
			"Durable commits of this node's raft log: fsyncs of the shared log's WAL (each may carry entries of many groups), or synced raft-boltdb transactions.", nil, nil),
		state: prometheus.NewDesc("quorate_raft_state",
			"Raft state of this node in each group: 0 follower, 1 candidate, 2 leader, 3 shutdown.", []string{"group"}, nil),
		term:    prometheus.NewDesc("quorate_raft_term", "Current raft term of each group.", []string{"group"}, nil),
		applied: prometheus.NewDesc("quorate_raft_applied_index", "Last raft index applied by this node in each group.", []string{"group"}, nil),
		commit:  prometheus.NewDesc("quorate_raft_commit_index", "Last raft index known committed by this node in each group.", []string{"group"}, nil),
		buckets: prometheus.NewDesc("quorate_buckets", "Buckets held in each group's state on this node.", []string{"group"}, nil),
		version: prometheus.NewDesc("quorate_config_version", "Configuration version applied in each group on this node.", []string{"group"}, nil),
		evicted: prometheus.NewDesc("quorate_request_ids_evicted_early_total",
			"Request ids this node's replica of each group forgot before their 2-minute window ended, because the group remembered the most it may; until their window ends, a request id the group does not remember is decided afresh and answered maybe_duplicate.", []string{"group"}, nil),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quorate_requests_refused_total",
			Help: "Allow calls this node refused at once, deciding nothing, by reason: overloaded (more work pending than it may queue), memory (a new client or request id while the live heap is near --max-memory), too_many_clients (a new client past --max-clients), request_ids_full (a new request id while its group remembers the most it may) or disk_full.",
		}, []string{"reason"}),
		diskFree: prometheus.NewDesc("quorate_disk_free_bytes", "Free space of the data dir's file system, as last checked (every second).", nil, nil),
		diskLow: prometheus.NewDesc("quorate_disk_low",
			"1 while the data dir's free space is below --min-free-disk: the node refuses new decisions (503 disk_full) and is not ready.", nil, nil),
		clockSkew: prometheus.NewDesc("quorate_clock_offset_seconds",
			"Offset from this node's clock of the median clock it is judged against (positive: that clock is ahead), as last measured (every 2 s; every 200 ms while not in bounds).", nil, nil),
		clockOff: prometheus.NewDesc("quorate_clock_off",
			"1 while this node's clock is not known to be in bounds (not yet checked since the node started, or further than half of --max-clock-offset from its peers' median): it stamps no decisions and hands its leadership over.", nil, nil),
		memLive: prometheus.NewDesc("quorate_memory_live_bytes",
			"The live heap as estimated: what the last garbage collection found live, plus what the replicas' state grew or shrank by since.", nil, nil),
		memBudget: prometheus.NewDesc("quorate_memory_budget_bytes", "This node's memory budget (--max-memory; 0: none).", nil, nil),
		memShed: prometheus.NewDesc("quorate_memory_shedding",
			"1 while the estimated live heap, with what pending decisions may add, is at 70% of the memory budget or more: new clients and request ids are refused with 503 overloaded.", nil, nil),
		heldBack: prometheus.NewDesc("quorate_clock_held_back_seconds",
			"How far this node's wall clock is ahead of where it may be: it stepped forward more than 1 s beyond the monotonic clock since the node started, and stamps follow the monotonic clock instead (0: not held back).", nil, nil),
		remember: prometheus.NewDesc("quorate_requests_remembered",
			"Decisions each group remembers on this node, by what they are remembered by: request_id (a caller's retry returns them for 2 minutes; from cluster version 3 up to 67,108,864 per group at 64 bytes each, new ids past that refused as request_ids_full) or origin (requests without an id, for the node's own retries: 10 s, at most 65,536 per group, about 230 bytes each).", []string{"group", "by"}, nil),
	}
	return m
}

// Register adds the metrics, and those of the raft port mux and net
// carry, to reg (nothing if reg is nil); call it once every group is open.
func (m *Collector) Register(reg prometheus.Registerer, mux *raftmux.Mux, net *raftnet.Net) error {
	if reg == nil {
		return nil
	}
	if err := reg.Register(m.batchSize); err != nil {
		return err
	}
	if err := reg.Register(m.refusals); err != nil {
		return err
	}
	if err := reg.Register(newPortMetrics(mux, net)); err != nil {
		return err
	}
	return reg.Register(m)
}

// ObserveBatch records the decisions one allow entry carries (the
// batcher's observer).
func (m *Collector) ObserveBatch(n int) { m.batchSize.Observe(float64(n)) }

// Refused counts a call refused for err, if err is a refusal (an unknown
// outcome is not one, whatever ended the attempts to learn it).
func (m *Collector) Refused(err error) {
	switch {
	case errors.Is(err, errs.ErrOutcomeUnknown):
	case memlimit.IsRefusal(err):
		m.refusals.WithLabelValues("memory").Inc()
	case errors.Is(err, errs.ErrOverloaded):
		m.refusals.WithLabelValues("overloaded").Inc()
	case errors.Is(err, errs.ErrTooManyClients):
		m.refusals.WithLabelValues("too_many_clients").Inc()
	case errors.Is(err, errs.ErrRequestIDsFull):
		m.refusals.WithLabelValues("request_ids_full").Inc()
	case errors.Is(err, errs.ErrDiskFull):
		m.refusals.WithLabelValues("disk_full").Inc()
	}
}

// Describe implements prometheus.Collector.
func (m *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.syncs, m.state, m.term, m.applied, m.commit, m.buckets, m.version, m.evicted, m.remember, m.heldBack, m.diskFree, m.diskLow, m.clockSkew, m.clockOff, m.memLive, m.memBudget, m.memShed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Collector) Collect(ch chan<- prometheus.Metric) {
	src := m.src
	groups := src.Groups()
	if len(groups) == 0 || groups[0] == nil {
		return // the groups are not open yet
	}
	ch <- prometheus.MustNewConstMetric(m.syncs, prometheus.CounterValue, float64(src.Syncs()))
	ch <- prometheus.MustNewConstMetric(m.diskFree, prometheus.GaugeValue, float64(src.Disk.Free()))
	low := 0.0
	if src.Disk.Low() {
		low = 1
	}
	ch <- prometheus.MustNewConstMetric(m.diskLow, prometheus.GaugeValue, low)
	ch <- prometheus.MustNewConstMetric(m.clockSkew, prometheus.GaugeValue, src.Guard.Skew().Seconds())
	clockOff := 0.0
	if src.Guard.State() != clock.InBounds {
		clockOff = 1
	}
	ch <- prometheus.MustNewConstMetric(m.clockOff, prometheus.GaugeValue, clockOff)
	ch <- prometheus.MustNewConstMetric(m.memLive, prometheus.GaugeValue, float64(src.Memory.Estimate()))
	ch <- prometheus.MustNewConstMetric(m.memBudget, prometheus.GaugeValue, float64(src.Memory.Max()))
	shed := 0.0
	if src.Memory.Shedding() {
		shed = 1
	}
	ch <- prometheus.MustNewConstMetric(m.memShed, prometheus.GaugeValue, shed)
	if sc, ok := src.Clock.(*clock.Stamp); ok {
		ch <- prometheus.MustNewConstMetric(m.heldBack, prometheus.GaugeValue, sc.HeldBack().Seconds())
	}
	for _, g := range groups {
		st := src.Status(g)
		ch <- prometheus.MustNewConstMetric(m.state, prometheus.GaugeValue, raftStateValue(g.Raft.State()), g.ID)
		ch <- prometheus.MustNewConstMetric(m.term, prometheus.GaugeValue, float64(st.Term), g.ID)
		ch <- prometheus.MustNewConstMetric(m.applied, prometheus.GaugeValue, float64(st.AppliedIndex), g.ID)
		ch <- prometheus.MustNewConstMetric(m.commit, prometheus.GaugeValue, float64(st.CommitIndex), g.ID)
		b, _, _ := g.FSM.Stats()
		ch <- prometheus.MustNewConstMetric(m.buckets, prometheus.GaugeValue, float64(b), g.ID)
		ch <- prometheus.MustNewConstMetric(m.version, prometheus.GaugeValue, float64(st.ConfigVersion), g.ID)
		ch <- prometheus.MustNewConstMetric(m.evicted, prometheus.CounterValue, float64(g.FSM.RequestIDsEvictedEarly()), g.ID)
		byID, byOrigin := g.FSM.Remembered()
		ch <- prometheus.MustNewConstMetric(m.remember, prometheus.GaugeValue, float64(byID), g.ID, "request_id")
		ch <- prometheus.MustNewConstMetric(m.remember, prometheus.GaugeValue, float64(byOrigin), g.ID, "origin")
	}
}

func raftStateValue(s raft.RaftState) float64 {
	switch s {
	case raft.Follower:
		return 0
	case raft.Candidate:
		return 1
	case raft.Leader:
		return 2
	}
	return 3
}
