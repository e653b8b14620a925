package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/client"
)

func configAnswer(cc api.ConfigChange, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return cc, nil
}

func printConfigChange(w io.Writer, v any) {
	cc := v.(api.ConfigChange)
	fmt.Fprintf(w, "config version %d applied in %d group(s)", cc.Version, len(cc.Applied))
	if len(cc.Lagging) > 0 {
		fmt.Fprintf(w, "; not yet in %s", strings.Join(cc.Lagging, ","))
	}
	fmt.Fprintln(w)
}

// clusterView is the answer status and members print: GET /v1/cluster.
func clusterView(ctx context.Context, c *client.Node, _ []string) (any, error) {
	r, err := c.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// printStatus writes GET /v1/cluster for people: the nodes, then the
// groups as the answering node's replicas see them (lag: entries
// committed but not yet applied there).
func printStatus(w io.Writer, v any) {
	st := v.(api.ClusterStatus)
	fmt.Fprintf(w, "cluster version %d, as node %s sees it\n\n", st.ClusterVersion, st.NodeID)
	printNodes(w, st)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tLEADER\tSTATE HERE\tTERM\tAPPLIED\tCOMMIT\tLAG\tCONFIG\tVOTERS")
	for _, g := range st.Groups {
		leader := g.Leader
		if leader == "" {
			leader = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", g.ID, leader, g.State, g.Term, g.AppliedIndex, g.CommitIndex,
			g.CommitIndex-min(g.AppliedIndex, g.CommitIndex), g.ConfigVersion, strings.Join(g.Voters, ","))
	}
	tw.Flush()
}

// printMembers writes the nodes of GET /v1/cluster.
func printMembers(w io.Writer, v any) { printNodes(w, v.(api.ClusterStatus)) }

func printNodes(w io.Writer, st api.ClusterStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tRAFT\tHTTP\tVERSION\tMAX CLUSTER VERSION")
	for _, n := range st.Nodes {
		version := n.Version
		if version == "" {
			version = "-" // a release before versions were gossiped
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", n.ID, n.State, n.RaftAddr, n.HTTPAddr, version, n.MaxClusterVersion)
	}
	tw.Flush()
}
