package fsm

import (
	"fmt"
	"runtime"
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

// BenchmarkApplyAllowBatch measures applying one 64-decision entry, each
// decision with a request id, the size group commit produces under load;
// ns/op divided by 64 is the cost of one decision in the state machine. At
// the base cluster version (v0.14.0's rules) and at this binary's highest.
func BenchmarkApplyAllowBatch(b *testing.B) {
	for _, v := range []uint32{BaseClusterVersion, MaxClusterVersion} {
		b.Run(fmt.Sprintf("cluster_version_%d", v), func(b *testing.B) {
			f, err := New(Options{})
			if err != nil {
				b.Fatal(err)
			}
			f.ApplyCommand(Encode(SetClusterVersion{Version: v}))
			entries := make([][]byte, 1024)
			for i := range entries {
				entries[i] = benchAllow(int64(i)*int64(time.Millisecond), 64, 10000)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				f.ApplyBatch([]*raft.Log{{Type: raft.LogCommand, Index: uint64(i + 2), Data: entries[i%len(entries)]}})
				i++
			}
		})
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

// BenchmarkStateBytes reports what the state costs in live heap: bytes per
// client (a bucket) and per remembered request id, with short (16-byte)
// and the longest ids (256-byte clients, 128-byte request ids), measured
// after a collection over 200,000 of each; request ids at
// ClusterVersionIDMemory (by digest) and, "_named", below it.
func BenchmarkStateBytes(b *testing.B) {
	const n = 200_000
	live := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for _, c := range []struct {
		name             string
		clientLen, idLen int
		version          uint32
	}{
		{"short_ids", 16, 0, MaxClusterVersion},
		{"short_ids_with_request_ids", 16, 16, MaxClusterVersion},
		{"short_ids_with_request_ids_named", 16, 16, ClusterVersionOriginsAlways},
		{"longest_ids", 256, 0, MaxClusterVersion},
		{"longest_ids_with_request_ids", 256, 128, MaxClusterVersion},
		{"longest_ids_with_request_ids_named", 256, 128, ClusterVersionOriginsAlways},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				f, err := New(Options{DedupMax: 2 * n})
				if err != nil {
					b.Fatal(err)
				}
				f.ApplyCommand(Encode(SetClusterVersion{Version: c.version}))
				reqs := make([]AllowRequest, 1000)
				before := live()
				for i := range n / len(reqs) {
					for j := range reqs {
						k := i*len(reqs) + j
						reqs[j] = AllowRequest{Client: fmt.Sprintf("%0*d", c.clientLen, k), Cost: 1}
						if c.idLen > 0 {
							reqs[j].RequestID = fmt.Sprintf("%0*d", c.idLen, k)
						}
					}
					f.ApplyCommand(Encode(Allow{Stamp: 1_800_000_000_000_000_000 + int64(i), Requests: reqs})) // stamps of this century
				}
				after := live()
				b.ReportMetric(float64(after-before)/n, "bytes/client")
				runtime.KeepAlive(f)
			}
		})
	}
}

// BenchmarkMillionClients reports what 1,000,000 live clients cost in
// heap, each with a bucket and, in "_with_tiers", a tier assignment (with
// its audit record: who assigned it, when), with 16-byte client ids; and
// what is left once their buckets are reclaimed ("bytes/client_after_reclaim":
// the assignments stay, they are configuration, not state that refills).
func BenchmarkMillionClients(b *testing.B) {
	const n = 1_000_000
	live := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const stamp = 1_800_000_000_000_000_000 // a stamp of this century
	for _, c := range []struct {
		name           string
		tiers, audited bool
	}{{"buckets", false, false}, {"buckets_with_tiers", true, false}, {"buckets_with_audited_tiers", true, true}} {
		tiers := c.tiers
		var audited Audited // zero: assigned as below ClusterVersionAudit, leaving no record
		if c.audited {
			audited = Audited{Stamp: stamp, Actor: "ops"}
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				f, err := New(Options{})
				if err != nil {
					b.Fatal(err)
				}
				f.ApplyCommand(Encode(SetClusterVersion{Version: MaxClusterVersion}))
				reqs := make([]AllowRequest, 1000)
				before := live()
				for i := range n / len(reqs) {
					for j := range reqs {
						k := i*len(reqs) + j
						reqs[j] = AllowRequest{Client: fmt.Sprintf("%016d", k), Cost: 1}
						if tiers {
							f.ApplyCommand(Encode(SetTier{Client: reqs[j].Client, Tier: "pro", Audited: audited}))
						}
					}
					f.ApplyCommand(Encode(Allow{Stamp: stamp + int64(i), Requests: reqs}))
				}
				if got := f.Buckets(); got != n {
					b.Fatalf("%d buckets, want %d", got, n)
				}
				full := live()
				f.ApplyCommand(Encode(Reclaim{Stamp: stamp + int64(time.Hour)}))
				if got := f.Buckets(); got != 0 {
					b.Fatalf("%d buckets left after reclaim", got)
				}
				after := live()
				b.ReportMetric((float64(full)-float64(before))/n, "bytes/client")
				// Below zero when the collection after reclaim found less
				// live than before the clients came (noise of a few KiB).
				b.ReportMetric((float64(after)-float64(before))/n, "bytes/client_after_reclaim")
				runtime.KeepAlive(f)
			}
		})
	}
}
