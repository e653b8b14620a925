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
package raftmux
