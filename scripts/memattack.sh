#!/usr/bin/env bash
# The decide-role memory attack against a throwaway single node on
# loopback (scripts/memattack), with the node's memory budget set by
# MAX_MEMORY (bytes; default 512 MiB). Stops the node it started, by PID.
#   DURATION=60s MAX_MEMORY=536870912 scripts/memattack.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
export PATH="$PATH:/usr/local/go/bin"
HTTP=${HTTP:-127.0.0.1:17170}
go build -o bin/quorate ./cmd/quorate
go build -o bin/memattack ./scripts/memattack
dir=$(mktemp -d)
./bin/quorate serve --data-dir "$dir/data" --http-addr "$HTTP" --raft-addr 127.0.0.1:17171 --gossip-addr 127.0.0.1:17172 \
  --log-level warn --max-memory "${MAX_MEMORY:-536870912}" ${QUORATE_ARGS:-} 2>"$dir/node.log" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
wait_ready "$HTTP" "$dir/node.log"
./bin/memattack -addr "http://$HTTP" -pid "$pid" -duration "${DURATION:-60s}" -conns "${CONNS:-16}"
curl -fsS "http://$HTTP/metrics" | grep -E '^quorate_(memory|requests_refused)' || true
