package cluster

import (
	"log/slog"

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
