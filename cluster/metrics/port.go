package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorate/quorate/transport/raftmux"
	"github.com/quorate/quorate/transport/raftnet"
)

// portMetrics exports the raft port's stream counts (raftmux.Stats) and
// the shared connections' traffic (raftnet.Stats).
type portMetrics struct {
	mux     *raftmux.Mux
	net     *raftnet.Net
	open    *prometheus.Desc
	pending *prometheus.Desc
	refused *prometheus.Desc
	frames  *prometheus.Desc
	writes  *prometheus.Desc
	dials   *prometheus.Desc
	capped  *prometheus.Desc
}

func newPortMetrics(m *raftmux.Mux, n *raftnet.Net) *portMetrics {
	return &portMetrics{
		mux: m,
		net: n,
		frames: prometheus.NewDesc("quorate_raftnet_requests_total",
			"Requests this node sent to its peers on the shared connections (every group's raft RPCs and forwarded calls), by whether they waited for the tick (lazy: heartbeats and empty appends) or not.",
			[]string{"kind"}, nil),
		writes: prometheus.NewDesc("quorate_raftnet_writes_total",
			"Writes that carried this node's requests to its peers (requests / writes is the coalescing factor), or its answers to theirs.", []string{"dir"}, nil),
		dials: prometheus.NewDesc("quorate_raftnet_dials_total", "Connections this node dialled to its peers, by result.", []string{"result"}, nil),
		capped: prometheus.NewDesc("quorate_raftnet_commit_capped_total",
			"Append requests from a leader whose commit index ran past their last entry (mostly batches to a follower catching up); the follower committed only up to that entry (the Raft paper's rule), not up to entries the request did not check.", nil, nil),
		open:    prometheus.NewDesc("quorate_raft_port_streams", "Streams open on the raft port (raft, internal RPC), including those still in their handshake.", nil, nil),
		pending: prometheus.NewDesc("quorate_raft_port_pending_streams", "Connections to the raft port still in their TLS handshake or header.", nil, nil),
		refused: prometheus.NewDesc("quorate_raft_port_refused_total",
			"Connections to the raft port closed by the node, by reason: limit (too many streams, in all or from one address), evicted (closed in the handshake to make room), tls (no or invalid cluster certificate), header, unknown_layer, backlog, idle.",
			[]string{"reason"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (p *portMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- p.open
	ch <- p.pending
	ch <- p.refused
	ch <- p.frames
	ch <- p.writes
	ch <- p.dials
	ch <- p.capped
}

// Collect implements prometheus.Collector.
func (p *portMetrics) Collect(ch chan<- prometheus.Metric) {
	st := p.mux.Stats()
	ch <- prometheus.MustNewConstMetric(p.open, prometheus.GaugeValue, float64(st.Open))
	ch <- prometheus.MustNewConstMetric(p.pending, prometheus.GaugeValue, float64(st.Pending))
	for _, r := range raftmux.Reasons {
		ch <- prometheus.MustNewConstMetric(p.refused, prometheus.CounterValue, float64(st.Refused[r]), string(r))
	}
	ns := p.net.Stats()
	ch <- prometheus.MustNewConstMetric(p.frames, prometheus.CounterValue, float64(ns.Lazy), "lazy")
	ch <- prometheus.MustNewConstMetric(p.frames, prometheus.CounterValue, float64(ns.Urgent), "urgent")
	ch <- prometheus.MustNewConstMetric(p.writes, prometheus.CounterValue, float64(ns.Writes), "requests")
	ch <- prometheus.MustNewConstMetric(p.writes, prometheus.CounterValue, float64(ns.ServedWrites), "answers")
	ch <- prometheus.MustNewConstMetric(p.dials, prometheus.CounterValue, float64(ns.DialsOK), "ok")
	ch <- prometheus.MustNewConstMetric(p.dials, prometheus.CounterValue, float64(ns.DialFailures), "failed")
	ch <- prometheus.MustNewConstMetric(p.capped, prometheus.CounterValue, float64(ns.CommitCapped))
}
