//go:build linux

package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Grudge says which nodes may not exchange packets: node i drops every
// packet from and to each node in Grudge[i]. The constructors below build
// symmetric grudges over node numbers 1..N.
type Grudge map[int][]int

// Complete cuts every pair of nodes that are in different components.
func Complete(components [][]int) Grudge {
	g := Grudge{}
	for ci, comp := range components {
		for _, a := range comp {
			for cj, other := range components {
				if ci != cj {
					g[a] = append(g[a], other...)
				}
			}
			slices.Sort(g[a])
		}
	}
	return g
}

// Isolate cuts node i off from every other node of nodes.
func Isolate(nodes []int, i int) Grudge {
	rest := slices.DeleteFunc(slices.Clone(nodes), func(n int) bool { return n == i })
	return Complete([][]int{{i}, rest})
}

// Halves splits order into a smaller and a larger half: 1|2 for 3 nodes,
// 2|3 for 5.
func Halves(order []int) [][]int {
	k := len(order) / 2
	return [][]int{slices.Clone(order[:k]), slices.Clone(order[k:])}
}

// Ring cuts order, taken as a ring, so that every node sees a majority
// (itself and its nearest neighbours on both sides) and no two nodes see
// the same majority. It needs a majority of odd size: 5 nodes (each sees
// 3), 9, ...; with 3 nodes no symmetric cut gives that, so it fails.
func Ring(order []int) (Grudge, error) {
	n := len(order)
	m := n/2 + 1
	if n < 5 || m%2 == 0 {
		return nil, fmt.Errorf("control: a majorities ring needs 5, 9, 13... nodes, got %d", n)
	}
	k := (m - 1) / 2 // neighbours seen on each side
	g := Grudge{}
	for p, a := range order {
		for d := k + 1; d < n-k; d++ {
			g[a] = append(g[a], order[(p+d)%n])
		}
		slices.Sort(g[a])
	}
	return g, nil
}

// Bridge splits order into two halves joined by one node that sees both:
// a|b|c for 3 nodes (a and c cut), a b|c|d e for 5.
func Bridge(order []int) Grudge {
	k := len(order) / 2
	left, right := order[:k], order[k+1:]
	return Complete([][]int{slices.Clone(left), slices.Clone(right)})
}

// Sees returns the nodes of nodes that i can exchange packets with under
// g, i itself included.
func (g Grudge) Sees(nodes []int, i int) []int {
	var out []int
	for _, j := range nodes {
		if j == i || !(slices.Contains(g[i], j) || slices.Contains(g[j], i)) {
			out = append(out, j)
		}
	}
	return out
}

// Cuts lists the cut pairs, "n1|n3", sorted.
func (g Grudge) Cuts() []string {
	var out []string
	for a, bs := range g {
		for _, b := range bs {
			x, y := min(a, b), max(a, b)
			s := nodeID(x) + "|" + nodeID(y)
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// restoreScript is the iptables-restore --noflush input that replaces
// node i's INPUT and OUTPUT rules with the drops g asks for.
func (c *Cluster) restoreScript(g Grudge, i int) string {
	var b strings.Builder
	b.WriteString("*filter\n-F INPUT\n-F OUTPUT\n")
	for _, j := range g[i] {
		fmt.Fprintf(&b, "-A INPUT -s %s/32 -j DROP\n", c.nodeIP(j))
		fmt.Fprintf(&b, "-A OUTPUT -d %s/32 -j DROP\n", c.nodeIP(j))
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// applyRules replaces every node namespace's INPUT and OUTPUT rules with
// the drops of g (an empty grudge heals), all namespaces at once.
func (c *Cluster) applyRules(ctx context.Context, g Grudge) error {
	var wg sync.WaitGroup
	errs := make([]error, c.opts.Nodes)
	for i := 1; i <= c.opts.Nodes; i++ {
		wg.Go(func() {
			_, errs[i-1] = execIn(ctx, c.NodeNS(i), []byte(c.restoreScript(g, i)), "iptables-restore", "-w", "--noflush")
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Partition makes every node's namespace drop the packets g cuts, from and
// to the peer's address (iptables -A INPUT -s PEER -j DROP and -A OUTPUT
// -d PEER -j DROP in the node's own namespace), replacing any earlier
// partition. Traffic with the client namespace is never cut. It records a
// start event under name. ErrUnsupported without namespaces.
func (c *Cluster) Partition(ctx context.Context, name string, g Grudge) error {
	if !c.useNS {
		return fmt.Errorf("control: %s: %w", name, ErrUnsupported)
	}
	if err := c.tornDown(); err != nil {
		return err
	}
	if err := c.applyRules(ctx, g); err != nil {
		return errors.Join(fmt.Errorf("control: %s: %w", name, err), c.applyRules(context.WithoutCancel(ctx), nil))
	}
	cuts := c.recordStart(faultPartition, name, map[string]string{"cut": strings.Join(g.Cuts(), ",")})
	c.log.Info("partitioned", "nemesis", name, "cut", cuts["cut"])
	return nil
}

// Heal flushes the INPUT and OUTPUT chains of every node namespace (the
// only rules there are Partition's) and records a stop event if a
// partition was active. Idempotent; a no-op without namespaces.
func (c *Cluster) Heal(ctx context.Context) error {
	if !c.useNS || c.tornDown() != nil {
		return nil
	}
	if err := c.applyRules(ctx, nil); err != nil {
		return fmt.Errorf("control: heal: %w", err)
	}
	if c.recordStop(faultPartition, nil) {
		c.log.Info("healed")
	}
	return nil
}

func (c *Cluster) tornDown() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.torn {
		return ErrTornDown
	}
	return nil
}

// recordStart marks a fault of kind active under name and records its
// start event; it returns detail.
func (c *Cluster) recordStart(kind faultKind, name string, detail map[string]string) map[string]string {
	c.mu.Lock()
	c.active[kind] = name
	c.mu.Unlock()
	c.recorder.record(name, PhaseStart, detail)
	return detail
}

// recordStop records the stop event of the active fault of kind, if there
// is one, and reports whether there was.
func (c *Cluster) recordStop(kind faultKind, detail map[string]string) bool {
	c.mu.Lock()
	name, ok := c.active[kind]
	delete(c.active, kind)
	c.mu.Unlock()
	if ok {
		c.recorder.record(name, PhaseStop, detail)
	}
	return ok
}
