package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/bucket"
	"github.com/quorate/quorate/client"
)

const usage = `quorate: a replicated rate limiter

Usage:
  quorate serve [flags]                          run a node (quorate serve -h for flags)
  quorate certs init --dir DIR --nodes n1,n2,n3 [--hosts n1=IP,...]
                                                 a cluster CA, node certificates and a gossip key
  quorate certs add --dir DIR --nodes n4 [--hosts n4=IP]
  quorate allow CLIENT [--cost N] [--request-id ID]
  quorate client get CLIENT
  quorate client set-tier CLIENT TIER
  quorate client remove-tier CLIENT
  quorate client reset CLIENT                     forget the client's bucket: full at its next decision
  quorate tier list
  quorate tier set NAME --capacity C --rate R     a token bucket; R in tokens per second, e.g. 0.5
  quorate tier set NAME --algorithm sliding_window --limit N --window SECONDS
                    [--mode shadow] [--when-unavailable allow] [--on-raise fill]
  quorate tier delete NAME
  quorate audit [--since VERSION] [--limit N]    configuration changes: who, when, before and after
  quorate default set --capacity C --rate R       (takes the same flags as tier set)
  quorate status                                  nodes and groups as tables (--json: the server's answer)
  quorate members                                 the nodes: state, addresses, versions
  quorate version                                 this binary's version and the cluster versions it runs
  quorate leave                                   make the node at --addr leave the cluster and stop
  quorate token new --name NAME --role decide|read|admin [--auth-file FILE]
                                                  make an API token and its auth-file entry
  quorate backup --out FILE                       a backup of every group, streamed from the node at --addr (admin)
  quorate restore --from FILE --data-dir DIR --node-id ID [--raft-addr ADDR]
                                                  make a data dir for a new one-node cluster from a backup
  quorate restore --from FILE --check             check a backup and print what it holds
  quorate recover --data-dir DIR --voters ID=RAFT_ADDR[,ID=RAFT_ADDR...]
                                                  last resort after losing a majority for good: make
                                                  these the only voters of every group (node stopped)

Client commands take --addr HOST:PORT or URL (env QUORATE_ADDR, default 127.0.0.1:7070),
--token TOKEN (env QUORATE_TOKEN), --ca-cert FILE (env QUORATE_CA_CERT: verify the
node's HTTPS certificate with this CA; implies https), --timeout (default 10s) and
--json (print the server's JSON answer).

Exit codes: 0 success (allow: allowed), 1 error, 2 usage, 3 allow: denied.
`

// usageError marks errors in how quorate was called (exit code 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// errDenied is returned by `quorate allow` for a denied request (exit code 3).
var errDenied = errors.New("denied")

func exitCode(err error) int {
	var u usageError
	switch {
	case errors.As(err, &u), errors.Is(err, flag.ErrHelp):
		return 2
	case errors.Is(err, errDenied):
		return 3
	}
	return 1
}

// run is the whole program: main only wires the process to it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{errors.New("no command")}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(ctx, rest, stdout, stderr)
	case "token":
		return tokenCommand(rest, stdout, stderr)
	case "recover":
		return recoverCommand(rest, stdout, stderr)
	case "restore":
		return restoreCommand(rest, stdout, stderr)
	case "certs":
		return certs(rest, stdout, stderr)
	case "version":
		if len(rest) > 0 {
			return usageError{fmt.Errorf("version takes no arguments, got %q", rest)}
		}
		printVersion(stdout)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	cl := &cli{stdout: stdout, stderr: stderr}
	name := cmd
	if len(rest) > 0 && slices.Contains([]string{"client", "tier", "default"}, cmd) {
		name, rest = cmd+" "+rest[0], rest[1:]
	}
	c, ok := cl.commands()[name]
	if !ok {
		fmt.Fprint(stderr, usage)
		return usageError{fmt.Errorf("unknown command %q", name)}
	}
	return cl.runCommand(ctx, name, c, rest)
}

// command is one client subcommand: its flags, how many arguments it
// takes, and what it does.
type command struct {
	args  []string // names of the positional arguments
	flags func(fs *flag.FlagSet)
	do    func(ctx context.Context, c *client.Node, args []string) (any, error)
	print func(w io.Writer, v any)
	// timeout is --timeout's default, if not 10 s.
	timeout time.Duration
}

type cli struct {
	stdout, stderr io.Writer
	addr           string
	timeout        time.Duration
	json           bool
	token          string
	caCert         string

	cost      int64
	requestID string
	capacity  string
	rate      string
	spec      bucket.Spec // the other policy flags
	onRaise   string
	since     uint64
	limit     int
	out       string
}

func (cl *cli) runCommand(ctx context.Context, name string, c command, args []string) error {
	fs := flag.NewFlagSet("quorate "+name, flag.ContinueOnError)
	fs.SetOutput(cl.stderr)
	fs.StringVar(&cl.addr, "addr", "127.0.0.1:7070", "address of a quorate node (env QUORATE_ADDR)")
	fs.DurationVar(&cl.timeout, "timeout", cmp.Or(c.timeout, 10*time.Second), "give up after this long")
	fs.BoolVar(&cl.json, "json", false, "print the server's answer as JSON")
	fs.StringVar(&cl.token, "token", "", "API token, sent as Authorization: Bearer (env QUORATE_TOKEN)")
	fs.StringVar(&cl.caCert, "ca-cert", "", "PEM CA certificate that signed the node's HTTPS certificate; implies https (env QUORATE_CA_CERT)")
	if c.flags != nil {
		c.flags(fs)
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usageError{err}
	}
	if len(pos) != len(c.args) {
		return usageError{fmt.Errorf("quorate %s takes %d argument(s) (%s), got %d", name, len(c.args), strings.Join(c.args, " "), len(pos))}
	}
	// Flags not on the command line come from QUORATE_ADDR, QUORATE_TOKEN, ...
	if err := parseWithEnv(fs, nil); err != nil {
		return usageError{err}
	}
	client, err := cl.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cl.timeout)
	defer cancel()
	v, err := c.do(ctx, client, pos)
	if v != nil {
		if cl.json || c.print == nil {
			_ = printJSON(cl.stdout, v)
		} else {
			c.print(cl.stdout, v)
		}
	}
	return err
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func (cl *cli) policyFlags(fs *flag.FlagSet) {
	fs.StringVar(&cl.capacity, "capacity", "", "token bucket: capacity in tokens")
	fs.StringVar(&cl.rate, "rate", "", "token bucket: refill rate in tokens per second, up to 9 decimals")
	fs.StringVar(&cl.spec.Algorithm, "algorithm", "", "token_bucket (the default) or sliding_window")
	fs.StringVar(&cl.spec.Limit, "limit", "", "sliding window: the most cost admitted in any window (1..10000)")
	fs.StringVar(&cl.spec.WindowSeconds, "window", "", "sliding window: its length in whole seconds (1..86400)")
	fs.StringVar(&cl.spec.Mode, "mode", "", "enforce (the default) or shadow: decide and count, but answer allowed")
	fs.StringVar(&cl.spec.WhenUnavailable, "when-unavailable", "", "deny (the default: 503) or allow (answer allowed, degraded) when the group cannot decide")
	fs.StringVar(&cl.onRaise, "on-raise", "", "keep (the default) or fill: a raise refills the tier's clients once")
}

// policy is the policy and on-raise the flags give.
func (cl *cli) policy() (bucket.Policy, bucket.OnRaise, error) {
	spec := cl.spec
	spec.Capacity, spec.RefillPerSecond = cl.capacity, cl.rate
	onRaise, err := bucket.ParseOnRaise(cl.onRaise)
	if err != nil {
		return bucket.Policy{}, 0, usageError{err}
	}
	p, err := spec.Parse()
	if err != nil {
		return bucket.Policy{}, 0, usageError{err}
	}
	return p, onRaise, nil
}

func (cl *cli) commands() map[string]command {
	return map[string]command{
		"allow": {
			args: []string{"CLIENT"},
			flags: func(fs *flag.FlagSet) {
				fs.Int64Var(&cl.cost, "cost", 1, "tokens to take (0 peeks)")
				fs.StringVar(&cl.requestID, "request-id", "", "idempotency key: a retry with the same id takes nothing")
			},
			do: func(ctx context.Context, c *client.Node, a []string) (any, error) {
				r, err := c.Allow(ctx, a[0], cl.cost, cl.requestID)
				if err != nil {
					return nil, err
				}
				if !r.Allowed {
					return r, errDenied
				}
				return r, nil
			},
			print: func(w io.Writer, v any) {
				r := v.(api.AllowResponse)
				verdict := "allowed"
				if !r.Allowed {
					verdict = "denied"
				}
				fmt.Fprintf(w, "%s remaining=%d limit=%d tier=%s retry_after_ms=%d reset_after_ms=%d", verdict, r.Remaining, r.Limit, r.Tier, r.RetryAfterMs, r.ResetAfterMs)
				if r.Duplicate {
					fmt.Fprint(w, " duplicate=true")
				}
				fmt.Fprintln(w)
			},
		},
		"client get": {
			args: []string{"CLIENT"},
			do: func(ctx context.Context, c *client.Node, a []string) (any, error) {
				r, err := c.GetClient(ctx, a[0])
				if err != nil {
					return nil, err
				}
				return r, nil
			},
		},
		"client set-tier": {
			args: []string{"CLIENT", "TIER"},
			do: func(ctx context.Context, c *client.Node, a []string) (any, error) {
				if err := c.SetClientTier(ctx, a[0], a[1]); err != nil {
					return nil, err
				}
				return api.ClientTierResponse{Client: a[0], Tier: a[1]}, nil
			},
			print: func(w io.Writer, v any) {
				r := v.(api.ClientTierResponse)
				fmt.Fprintf(w, "client %s is in tier %s\n", r.Client, r.Tier)
			},
		},
		"client remove-tier": {
			args: []string{"CLIENT"},
			do: func(ctx context.Context, c *client.Node, a []string) (any, error) {
				if err := c.RemoveClientTier(ctx, a[0]); err != nil {
					return nil, err
				}
				return api.ClientTierResponse{Client: a[0]}, nil
			},
			print: func(w io.Writer, v any) {
				fmt.Fprintf(w, "client %s uses the default policy\n", v.(api.ClientTierResponse).Client)
			},
		},
		"client reset": {
			args: []string{"CLIENT"},
			do: func(ctx context.Context, c *client.Node, a []string) (any, error) {
				return c.ResetClient(ctx, a[0])
			},
			print: func(w io.Writer, v any) {
				r := v.(api.ResetResponse)
				if r.HadBucket {
					fmt.Fprintf(w, "client %s reset: its bucket is full again\n", r.Client)
				} else {
					fmt.Fprintf(w, "client %s had no bucket (it was full already)\n", r.Client)
				}
			},
		},
		"tier list": {
			do: func(ctx context.Context, c *client.Node, _ []string) (any, error) {
				r, err := c.Tiers(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
			print: func(w io.Writer, v any) {
				r := v.(api.TiersResponse)
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "TIER\tALGORITHM\tLIMIT\tRATE\tMODE\tWHEN UNAVAILABLE\n")
				row := func(name string, p api.Policy) {
					limit, rate := fmt.Sprint(p.Capacity), p.RefillPerSecond.String()+"/s"
					if p.Algorithm == "sliding_window" {
						limit, rate = fmt.Sprint(p.Limit), fmt.Sprintf("per %ds", p.WindowSeconds)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, p.Algorithm, limit, rate, p.Mode, p.WhenUnavailable)
				}
				row(bucket.DefaultTierName, r.Default)
				names := make([]string, 0, len(r.Tiers))
				for n := range r.Tiers {
					names = append(names, n)
				}
				slices.Sort(names)
				for _, n := range names {
					row(n, r.Tiers[n])
				}
				tw.Flush()
				fmt.Fprintf(w, "config version %d\n", r.Version)
			},
		},
		"tier set": {
			args:  []string{"NAME"},
			flags: cl.policyFlags,
			do: func(ctx context.Context, c *client.Node, a []string) (any, error) {
				p, onRaise, err := cl.policy()
				if err != nil {
					return nil, err
				}
				return configAnswer(c.PutTier(ctx, a[0], p, onRaise))
			},
			print: printConfigChange,
		},
		"tier delete": {
			args: []string{"NAME"},
			do: func(ctx context.Context, c *client.Node, a []string) (any, error) {
				return configAnswer(c.DeleteTier(ctx, a[0]))
			},
			print: printConfigChange,
		},
		"default set": {
			flags: cl.policyFlags,
			do: func(ctx context.Context, c *client.Node, _ []string) (any, error) {
				p, onRaise, err := cl.policy()
				if err != nil {
					return nil, err
				}
				return configAnswer(c.PutDefault(ctx, p, onRaise))
			},
			print: printConfigChange,
		},
		"leave": {
			do:    func(ctx context.Context, c *client.Node, _ []string) (any, error) { return leave(ctx, c, cl.stderr) },
			print: func(w io.Writer, v any) { fmt.Fprintln(w, "node left the cluster and stopped") },
		},
		"audit": {
			flags: func(fs *flag.FlagSet) {
				fs.Uint64Var(&cl.since, "since", 0, "list the changes after this configuration version")
				fs.IntVar(&cl.limit, "limit", 100, "list at most this many changes (1..1000)")
			},
			do: func(ctx context.Context, c *client.Node, _ []string) (any, error) {
				r, err := c.Audit(ctx, cl.since, cl.limit)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
			print: func(w io.Writer, v any) { printAudit(w, v.(api.AuditResponse), cl.since) },
		},
		"backup": {
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&cl.out, "out", "", "write the backup to this file (through FILE.partial, renamed once checked)")
			},
			do:      func(ctx context.Context, c *client.Node, _ []string) (any, error) { return takeBackup(ctx, c, cl.out) },
			print:   func(w io.Writer, v any) { printBackup(w, v.(backupSummary)) },
			timeout: backupTimeout,
		},
		"status":  {do: clusterView, print: printStatus},
		"members": {do: clusterView, print: printMembers},
	}
}
