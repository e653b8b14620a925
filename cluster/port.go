package cluster

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorate/quorate/transport/raftmux"
)

// muxOptions configures the raft port: mutual TLS if the node has cluster
// TLS, and limits that leave room for every peer's streams. A peer opens,
// per group whose leader it is, a heartbeat stream and up to three for
// replication (raft's MaxPool), plus up to 64 pooled internal RPC streams:
// the per-address cap is several times that, and a flood from one address
// (or of connections that never finish their handshake, from anywhere)
// cannot take the streams real peers need.
func muxOptions(o Options, logger *slog.Logger) raftmux.Options {
	perIP := max(raftmux.DefaultMaxStreamsPerIP, 8*(o.Groups+1)+128)
	mo := raftmux.Options{
		Logger:          logger.With("component", "raftmux"),
		MaxStreamsPerIP: perIP,
		MaxStreams:      max(raftmux.DefaultMaxStreams, 4*perIP),
	}
	if o.TLS != nil {
		mo.TLS = &raftmux.TLS{Server: o.TLS.Server, Client: o.TLS.Client}
	}
	return mo
}

// portMetrics exports the raft port's stream counts (raftmux.Stats).
type portMetrics struct {
	mux     *raftmux.Mux
	open    *prometheus.Desc
	pending *prometheus.Desc
	refused *prometheus.Desc
}

func newPortMetrics(m *raftmux.Mux) *portMetrics {
	return &portMetrics{
		mux:     m,
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
}

// Collect implements prometheus.Collector.
func (p *portMetrics) Collect(ch chan<- prometheus.Metric) {
	st := p.mux.Stats()
	ch <- prometheus.MustNewConstMetric(p.open, prometheus.GaugeValue, float64(st.Open))
	ch <- prometheus.MustNewConstMetric(p.pending, prometheus.GaugeValue, float64(st.Pending))
	for _, r := range raftmux.Reasons {
		ch <- prometheus.MustNewConstMetric(p.refused, prometheus.CounterValue, float64(st.Refused[r]), string(r))
	}
}
