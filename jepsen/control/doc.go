// Package control runs a quorate cluster for the fault suite and injects
// faults into it: it creates the network, starts and stops the node
// processes, and partitions, pauses, kills and skews them.
//
// # Layout
//
// With Options.UseNetns (and root, and iproute2's ip) every node runs in a
// network namespace of its own, <prefix>-n1 .. <prefix>-nN, at 10.77.0.1N/24
// (n1 = 10.77.0.11). A namespace <prefix>-br holds a Linux bridge br0 that
// joins one veth pair per node and one for <prefix>-client (10.77.0.100),
// the namespace the runner is expected to run the harness in. Nothing is
// added to the namespace the harness was started from: every namespace is
// named, so Setup, Teardown and node control work from any namespace, and
// the HTTP client the Cluster uses (HTTPClient) creates its sockets inside
// <prefix>-client, so it reaches the nodes from the root namespace too.
//
// Without namespaces (UseNetns false, or not root) the nodes run on
// 127.0.0.1N (127.0.0.11, 127.0.0.12, ...) and only process faults and
// clock skew are available: see Supports.
//
// Each node serves HTTP on :7070, raft on :7071, gossip on :7072 and the
// fault-injection debug listener on :7079 (the binary must be built with
// -tags faultinject). Data lives in <WorkDir>/nI and the node's output is
// appended to <WorkDir>/nI.log.
//
// # Cleaning up
//
// Teardown kills every node process this Cluster started (by PID) and
// deletes its namespaces (by name); it is idempotent and safe to call from a
// signal handler's goroutine. Node processes also get SIGKILL if the harness
// dies (PR_SET_PDEATHSIG). CleanupStale removes what a crashed earlier run
// with the same prefix left behind.
package control
