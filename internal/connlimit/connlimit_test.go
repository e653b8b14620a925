package connlimit

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCounterCapsInAllAndPerAddress(t *testing.T) {
	c := New(3, 2)
	assert.True(t, c.Admit("a"))
	assert.True(t, c.Admit("a"))
	assert.False(t, c.Admit("a"), "a third from one address")
	assert.True(t, c.Admit("b"))
	assert.False(t, c.Admit("c"), "a fourth in all")
	c.Release("a")
	assert.True(t, c.Admit("c"), "a place given back is taken")
	assert.Equal(t, Stats{Admitted: 4, Refused: 2, Open: 3, Peak: 3}, c.Stats())
}

func TestConnGivesItsPlaceBackOnce(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	c := New(1, 1)
	require.True(t, c.Admit("x"))
	w := c.Wrap(a, "x")
	require.NoError(t, w.Close())
	_ = w.Close()
	assert.Equal(t, 0, c.Stats().Open, "closed twice, released once")
	assert.True(t, c.Admit("x"))
}
