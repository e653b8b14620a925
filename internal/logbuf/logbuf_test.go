package logbuf

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLineWithFindsTheFirstLineHoldingEveryPart(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { fmt.Fprintf(&b, "msg=hello n=%d\n", i) })
	}
	wg.Wait()
	fmt.Fprintln(&b, "msg=bye n=3")
	line, ok := b.LineWith("bye", "n=3")
	assert.True(t, ok)
	assert.Equal(t, "msg=bye n=3\n", line)
	_, ok = b.LineWith("bye", "n=4")
	assert.False(t, ok, "no line holds both")
	assert.Len(t, b.String(), 8*len("msg=hello n=0\n")+len("msg=bye n=3\n"), "every write kept")
}
