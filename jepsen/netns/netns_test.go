package netns

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDialIntoNamespace creates a namespace, listens on its loopback and
// checks that the dialer reaches it while a plain dial from this namespace
// does not.
func TestDialIntoNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	name := fmt.Sprintf("qnt-%d", rand.IntN(1<<30))
	require.NoError(t, exec.Command("ip", "netns", "add", name).Run())
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", name).Run() })
	require.NoError(t, exec.Command("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up").Run())

	ln, err := Listen(Path(name), "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "inside")
			c.Close()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dialer(Path(name))(ctx, "tcp", ln.Addr().String())
	require.NoError(t, err)
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	c.Close()
	assert.Equal(t, "inside", string(got))

	outside, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	if err == nil {
		outside.Close()
	}
	assert.Error(t, err, "the namespace's loopback must not be reachable from this namespace")

	_, err = Dialer(Path(name+"-missing"))(ctx, "tcp", ln.Addr().String())
	assert.Error(t, err)
}
