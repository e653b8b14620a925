package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/client"
)

// leavePoll is how often `quorate leave` asks the leaving node what it is
// still part of.
const leavePoll = 250 * time.Millisecond

// leave is `quorate leave`: it asks the node to leave and, while the node
// hands its groups over, prints to progress what it is still waiting for,
// each time that changes.
func leave(ctx context.Context, c *client.Node, progress io.Writer) (any, error) {
	done := make(chan error, 1)
	go func() { done <- c.Leave(ctx) }()
	tick := time.NewTicker(leavePoll)
	defer tick.Stop()
	start, last := time.Now(), ""
	show := func() {
		st, err := c.Cluster(ctx)
		if err != nil {
			return // closing: the answer to the leave says how it ended
		}
		if w := waitingFor(st); w != last {
			fmt.Fprintf(progress, "%5.1fs  %s\n", time.Since(start).Seconds(), w)
			last = w
		}
	}
	show() // at once: a short leave may be over before the first tick
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, err
			}
			return api.StatusResponse{Status: "left"}, nil
		case <-tick.C:
			show()
		}
	}
}

// waitingFor says, from a leaving node's status, what its leave still
// waits for: the groups it leads (their leadership moves first), then the
// groups whose voters still include it (their leaders remove it).
func waitingFor(st api.ClusterStatus) string {
	var leads, votes []string
	for _, g := range st.Groups {
		if g.State == "Leader" {
			leads = append(leads, g.ID)
		} else if slices.Contains(g.Voters, st.NodeID) {
			votes = append(votes, g.ID)
		}
	}
	if len(leads) == 0 && len(votes) == 0 {
		return "in no group's voters as " + st.NodeID + " sees it; leaving gossip and stopping"
	}
	var parts []string
	if len(leads) > 0 {
		parts = append(parts, fmt.Sprintf("handing over the leadership of %s", groupList(leads)))
	}
	if len(votes) > 0 {
		who := "leaders"
		if len(votes) == 1 {
			who = "leader"
		}
		parts = append(parts, fmt.Sprintf("waiting for the %s of %s to remove it", who, groupList(votes)))
	}
	return strings.Join(parts, "; ")
}

// groupList names groups for people: "group 3", "groups 0, 5 and meta".
func groupList(ids []string) string {
	if len(ids) == 1 {
		return "group " + ids[0]
	}
	return "groups " + strings.Join(ids[:len(ids)-1], ", ") + " and " + ids[len(ids)-1]
}
