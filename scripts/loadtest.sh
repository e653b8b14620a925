#!/usr/bin/env bash
# Starts a throwaway single node on loopback with a fresh data dir, drives it
# with scripts/loadgen, prints the result (throughput, latency, CPU per
# decision, decisions per raft entry and per fsync), and stops the node it
# started (by PID). CEILING=1 drives the in-memory ceiling (scripts/ceiling)
# on the same address instead, for a ratio measured the same way.
#   CONNS=64 DURATION=20s KEYS=10000 scripts/loadtest.sh
#   QUORATE_ARGS="--groups 4" scripts/loadtest.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
export PATH="$PATH:/usr/local/go/bin"
CONNS=${CONNS:-64}
DURATION=${DURATION:-20s}
KEYS=${KEYS:-10000}
HTTP=${HTTP:-127.0.0.1:17070}
RAFT=${RAFT:-127.0.0.1:17071}

go build -o bin/quorate ./cmd/quorate
go build -o bin/loadgen ./scripts/loadgen
go build -o bin/ceiling ./scripts/ceiling
dir=$(mktemp -d)
if [ -n "${CEILING:-}" ]; then
  ./bin/ceiling -addr "$HTTP" 2>"$dir/node.log" &
else
  # shellcheck disable=SC2086
  ./bin/quorate serve --data-dir "$dir/data" --http-addr "$HTTP" --raft-addr "$RAFT" --gossip-addr "${GOSSIP:-127.0.0.1:17072}" --log-level warn \
    ${QUORATE_ARGS:-} 2>"$dir/node.log" &
fi
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT INT TERM

wait_ready "$HTTP" "$dir/node.log"

./bin/loadgen -targets "http://$HTTP" -c "$CONNS" -duration "$DURATION" -keys "$KEYS" -pids "$pid" -metrics "http://$HTTP"
