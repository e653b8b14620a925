package client

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"sync/atomic"
)

// idSource makes request ids unique across processes and calls: 96 random
// bits drawn once per Client, then a counter. A collision would need two
// Clients to draw the same 96 bits within the cluster's dedup window.
type idSource struct {
	prefix string
	n      atomic.Uint64
}

func newIDSource() *idSource {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &idSource{prefix: base64.RawURLEncoding.EncodeToString(b[:]) + "."}
}

// next returns a new id: 16 characters of prefix, a dot, the counter in
// base 36; well under api.MaxRequestIDLen.
func (s *idSource) next() string {
	return s.prefix + strconv.FormatUint(s.n.Add(1), 36)
}
