#!/usr/bin/env bash
# The decide-role memory attack against a throwaway single node on
# loopback (scripts/memattack), with the node's memory budget set by
# MAX_MEMORY (bytes; default 512 MiB). Stops the node it started, by PID.
#   DURATION=60s MAX_MEMORY=536870912 scripts/memattack.sh
set -euo pipefail
cd "$(dirname "$0")/.."
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
for _ in $(seq 1 100); do
  curl -fsS "http://$HTTP/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://$HTTP/readyz" >/dev/null || { cat "$dir/node.log"; exit 1; }
./bin/memattack -addr "http://$HTTP" -pid "$pid" -duration "${DURATION:-60s}" -conns "${CONNS:-16}"
curl -fsS "http://$HTTP/metrics" | grep -E '^quorate_(memory|requests_refused)' || true
