// Package raftmux carries many streams over one TCP listener: the Raft
// traffic of every group on a node, and any other internal protocol that
// wants the same port.
//
// A [Mux] owns the listener. Each destination registers a [Layer] under a
// name; a Layer is a [github.com/hashicorp/raft.StreamLayer] (so it can back a
// raft.NetworkTransport) and a [net.Listener] with a DialContext method (so
// it can back an http.Server and an http.Transport).
//
// # Stream header
//
// Every stream opens with a header naming its destination:
//
//	offset  size  field
//	0       4     magic, the ASCII bytes "QRM1"
//	4       1     n, the length of the name in bytes, 1..255
//	5       n     the name (any bytes)
//
// Everything after the header belongs to the layer of that name. A Layer's
// Dial writes the header for its own name, so layer "7" on one node talks to
// layer "7" on another. The accepting Mux closes a stream whose magic is
// wrong, whose name is empty or not registered, or whose header is not
// complete within [Options.HeaderTimeout]; it logs the remote address and
// the reason, and never lets one slow or broken stream hold up another.
//
// # TLS
//
// With [Options.TLS] every stream is its own TLS connection and the header
// travels inside it: the accepting side runs the handshake (within the
// same HeaderTimeout) before it reads the header, so a peer that cannot
// complete a handshake never reaches a layer. [PeerCertificate] returns the
// certificate the other end presented.
//
// # Limits
//
// An accepted connection counts against [Options.MaxStreams] and
// [Options.MaxStreamsPerIP] from Accept until it is closed, by the Mux or
// by the layer's owner. While it is in its handshake it also counts
// against [Options.MaxPending]; a new connection that finds no room closes
// the oldest pending one. A stream handed to a layer is closed once it has
// carried nothing for [Options.IdleTimeout]. [Mux.Stats] counts open
// streams and, by [Reason], the connections the Mux closed.
package raftmux
