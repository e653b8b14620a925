package grouphash

import (
	"hash/fnv"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOfIsFNV1aModGroups(t *testing.T) {
	for _, id := range []string{"", "a", "alice", "load-42", "k64-10000-1-9999", "ünïcode"} {
		h := fnv.New64a()
		_, _ = h.Write([]byte(id))
		for _, g := range []int{1, 3, 8, 16} {
			assert.Equal(t, int(h.Sum64()%uint64(g)), Of(id, g), "%q over %d groups", id, g)
		}
	}
	var sink int
	assert.Zero(t, testing.AllocsPerRun(100, func() { sink += Of("some-client-id", 8) }))
	assert.Less(t, sink, 8*101)
}
