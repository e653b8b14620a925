#!/usr/bin/env bash
# Measures, in one run and with the same load, (a) a throwaway single node on
# 127.0.0.1:17070 and (b) a throwaway 3-node cluster (scripts/cluster.sh on
# 127.0.0.1-3:7070) with the connections spread over the three nodes; prints
# both, the cluster/single ratios and the group-commit batch sizes of every
# node. Everything it starts is stopped by PID on exit; loopback only.
#   CONNS=64 DURATION=20s KEYS=10000 scripts/bench-cluster.sh
# Extra serve flags for every node: QUORATE_ARGS="--max-inflight 4".
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
CONNS=${CONNS:-64}
DURATION=${DURATION:-20s}
KEYS=${KEYS:-10000}
HTTP=127.0.0.1:17070
RAFT=127.0.0.1:17071
CLUSTER=(127.0.0.1:7070 127.0.0.2:7070 127.0.0.3:7070)

for a in "$HTTP" "${CLUSTER[@]}"; do
  if curl -fsS -m 1 "http://$a/healthz" >/dev/null 2>&1; then
    echo "something already serves $a; stop it first" >&2
    exit 1
  fi
done

go build -o bin/quorate ./cmd/quorate
go build -o bin/loadgen ./scripts/loadgen
dir=$(mktemp -d "${TMPDIR:-/tmp}/quorate-bench.XXXXXX")
export QUORATE_CLUSTER_DIR="$dir/cluster"
pid=""
cleanup() {
  rc=$?
  trap - EXIT INT TERM
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  [ -d "$QUORATE_CLUSTER_DIR" ] && { scripts/cluster.sh down || true; }
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# metrics URL...: prints "url sum count" per node for quorate_raft_entry_decisions.
batches() {
  for u in "$@"; do
    curl -fsS -m 5 "http://$u/metrics" | awk -v u="$u" '
      /^quorate_raft_entry_decisions_sum/ {s=$2}
      /^quorate_raft_entry_decisions_count/ {c=$2}
      END { printf "%s %s %s\n", u, (s == "" ? 0 : s), (c == "" ? 0 : c) }'
  done
}

# (a) single node
echo "== single node (http://$HTTP), $CONNS connections, $DURATION, $KEYS keys"
mkdir -p "$dir/single"
# shellcheck disable=SC2086
./bin/quorate serve --data-dir "$dir/single/data" --http-addr "$HTTP" --raft-addr "$RAFT" --gossip-addr 127.0.0.1:17072 --log-level warn \
  ${QUORATE_ARGS:-} 2>"$dir/single/node.log" &
pid=$!
for _ in $(seq 1 150); do
  curl -fsS "http://$HTTP/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://$HTTP/readyz" >/dev/null || { cat "$dir/single/node.log"; exit 1; }
batches "$HTTP" >"$dir/single.before"
./bin/loadgen -targets "http://$HTTP" -c "$CONNS" -duration "$DURATION" -keys "$KEYS" -json >"$dir/single.json"
batches "$HTTP" >"$dir/single.after"
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""

# (b) 3-node cluster
echo "== 3-node cluster (${CLUSTER[*]}), $CONNS connections spread over the nodes, $DURATION, $KEYS keys"
scripts/cluster.sh up >"$dir/cluster-up.log" 2>&1 || { cat "$dir/cluster-up.log"; exit 1; }
targets=$(printf 'http://%s,' "${CLUSTER[@]}"); targets=${targets%,}
batches "${CLUSTER[@]}" >"$dir/cluster.before"
./bin/loadgen -targets "$targets" -c "$CONNS" -duration "$DURATION" -keys "$KEYS" -json >"$dir/cluster.json"
batches "${CLUSTER[@]}" >"$dir/cluster.after"
scripts/cluster.sh down >/dev/null

python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
def load(name):
    with open(f"{d}/{name}.json") as f:
        return json.load(f)
def batches(name):
    before = {l.split()[0]: l.split()[1:] for l in open(f"{d}/{name}.before") if l.strip()}
    out = []
    for l in open(f"{d}/{name}.after"):
        if not l.strip():
            continue
        u, s, c = l.split()
        s0, c0 = before.get(u, ["0", "0"])
        out.append((u, float(s) - float(s0), float(c) - float(c0)))
    return out
s, c = load("single"), load("cluster")
def show(title, r):
    print(f"{title}: {r['per_second']:.0f} decisions/s  p50={r['p50_us']}µs p90={r['p90_us']}µs p99={r['p99_us']}µs max={r['max_us']}µs"
          f"  (requests={r['requests']} errors={r['errors']} in {r['seconds']:.1f}s)")
    if r.get("first_error"):
        print(f"  first error: {r['first_error']}")
print()
show("single node ", s)
show("3-node      ", c)
def ratio(a, b):
    return f"{a / b:.2f}" if b else "n/a"
print(f"cluster/single: throughput x{ratio(c['per_second'], s['per_second'])}"
      f"  p50 x{ratio(c['p50_us'], s['p50_us'])}  p99 x{ratio(c['p99_us'], s['p99_us'])}")
print("group-commit batch size (decisions per raft entry, during the load):")
for name in ("single", "cluster"):
    ts, tc = 0.0, 0.0
    for u, sm, cn in batches(name):
        ts, tc = ts + sm, tc + cn
        mean = f"{sm / cn:.1f}" if cn else "-"
        print(f"  {name:7} {u:16} entries={cn:.0f} decisions={sm:.0f} mean={mean}")
    if name == "cluster":
        print(f"  {name:7} {'all nodes':16} entries={tc:.0f} decisions={ts:.0f} mean={(ts / tc if tc else 0):.1f}")
PY
