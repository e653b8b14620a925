package forward

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorate/quorate/cluster/errs"
	"github.com/quorate/quorate/cluster/peerrpc"
	"github.com/quorate/quorate/fsm"
)

// A request queued on a forwarder as it closes is answered "shutting down"
// (nothing was sent), not left to wait out its deadline and then reported
// as an unknown outcome.
func TestClosedForwarderAnswersAtOnce(t *testing.T) {
	f := New("127.0.0.1:1", func(context.Context, string, []byte) ([]byte, error) {
		panic("a closed forwarder sends nothing")
	}, 1)
	f.Close(errs.ErrShuttingDown)
	for i := range 50 {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := f.Submit(c, peerrpc.AllowItem{Group: 0, Requests: []fsm.AllowRequest{{Client: "x", Cost: 1}}})
		cancel()
		assert.ErrorIs(t, err, errs.ErrShuttingDown, "submit %d", i)
	}
}

// Forwarders to addresses no longer used are retired, so that a node does
// not keep a goroutine and a queue for every address it ever forwarded to;
// one still in use stays, and a request that reaches a retired one is told
// to retry (nothing was sent), never that the node is shutting down.
func TestIdleForwardersAreRetired(t *testing.T) {
	// As the node's call answers for a peer it cannot dial: nothing was sent.
	p := NewPool(func(_ context.Context, addr string, _ []byte) ([]byte, error) {
		return nil, fmt.Errorf("%w: forward to %s: cannot dial", errs.ErrNotLeader, addr)
	}, 4)
	defer p.Close(errs.ErrShuttingDown)
	gone, used := "127.0.0.1:1", "127.0.0.1:2"
	old := p.Get(gone)
	c, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := p.Get(used).Submit(c, peerrpc.AllowItem{Group: 0, Requests: []fsm.AllowRequest{{Client: "x", Cost: 1}}})
	require.ErrorIs(t, err, errs.ErrNotLeader, "a peer that cannot be dialled was sent nothing")

	// Both were used within the first period; then only one of them was.
	p.RetireIdle()
	assert.Same(t, old, p.Get(gone), "used within the idle time")
	_, err = p.Get(used).Submit(c, peerrpc.AllowItem{Group: 0, Requests: []fsm.AllowRequest{{Client: "x", Cost: 1}}})
	require.ErrorIs(t, err, errs.ErrNotLeader)
	p.RetireIdle()

	select {
	case <-old.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the retired forwarder's goroutine is still running")
	}
	_, err = old.Submit(c, peerrpc.AllowItem{Group: 0, Requests: []fsm.AllowRequest{{Client: "x", Cost: 1}}})
	assert.ErrorIs(t, err, errs.ErrNotLeader, "retried elsewhere, as nothing was sent")
	assert.NotErrorIs(t, err, errs.ErrShuttingDown)
	p.mu.Lock()
	assert.NotContains(t, p.forwarders, gone)
	assert.Contains(t, p.forwarders, used)
	p.mu.Unlock()
	assert.NotSame(t, old, p.Get(gone), "a new one is made on the next use")
}
