package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// benchAllow returns an encoded allow entry of n decisions over keys clients.
func benchAllow(stamp int64, n, keys int) []byte {
	reqs := make([]AllowRequest, n)
	for i := range reqs {
		reqs[i] = AllowRequest{Client: fmt.Sprintf("client-%d", i%keys), Cost: 1, RequestID: fmt.Sprintf("req-%d-%d", stamp, i)}
	}
	return Encode(Allow{Stamp: stamp, Requests: reqs})
}

// BenchmarkApplyAllowBatch measures applying one 64-decision entry, the
// size group commit produces under load; ns/op divided by 64 is the cost
// of one decision in the state machine.
func BenchmarkApplyAllowBatch(b *testing.B) {
	f, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	entries := make([][]byte, 1024)
	for i := range entries {
		entries[i] = benchAllow(int64(i)*int64(time.Millisecond), 64, 10000)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		f.ApplyBatch([]*raft.Log{{Type: raft.LogCommand, Index: uint64(i + 1), Data: entries[i%len(entries)]}})
		i++
	}
}

// BenchmarkDecodeAllowBatch measures decoding one 64-decision entry.
func BenchmarkDecodeAllowBatch(b *testing.B) {
	data := benchAllow(1, 64, 10000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeAllowBatch measures encoding one 64-decision entry.
func BenchmarkEncodeAllowBatch(b *testing.B) {
	reqs := make([]AllowRequest, 64)
	for i := range reqs {
		reqs[i] = AllowRequest{Client: fmt.Sprintf("client-%d", i), Cost: 1}
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = Encode(Allow{Stamp: 1, Requests: reqs})
	}
}
