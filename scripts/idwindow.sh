#!/usr/bin/env bash
# Request ids at one group's top rate for longer than their window: a
# throwaway one-group node on loopback, CONNS connections sending batches of
# BATCH decisions, each with a request id of its own (loadgen -request-ids),
# for DURATION (default 130 s: past the 2-minute window). Then the node's
# metrics: ids remembered, ids forgotten early (must be 0), refusals, and
# the live heap, from which the bytes per remembered id. Stops the node it
# started, by PID.
#   DURATION=130s scripts/idwindow.sh        (make id-window)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
export PATH="$PATH:/usr/local/go/bin"
HTTP=${HTTP:-127.0.0.1:17170}
go build -o bin/quorate ./cmd/quorate
go build -o bin/loadgen ./scripts/loadgen
dir=$(mktemp -d)
./bin/quorate serve --data-dir "$dir/data" --http-addr "$HTTP" --raft-addr 127.0.0.1:17171 --gossip-addr 127.0.0.1:17172 \
  --groups 1 --log-level warn ${QUORATE_ARGS:-} 2>"$dir/node.log" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
wait_ready "$HTTP" "$dir/node.log"
metric() { curl -fsS "http://$HTTP/metrics" | awk -v m="$1" '$1 ~ "^"m {s += $2} END {printf "%.0f\n", s}'; }
heap0=$(metric 'quorate_memory_live_bytes')
./bin/loadgen -mode quorate -targets "http://$HTTP" -c "${CONNS:-16}" -batch "${BATCH:-1000}" -keys 10000 \
  -duration "${DURATION:-130s}" -requests 200000000 -request-ids -prefix idw
ids=$(metric 'quorate_requests_remembered\{by="request_id",group="0"\}')
early=$(metric 'quorate_request_ids_evicted_early_total\{group="0"\}')
heap=$(metric 'quorate_memory_live_bytes')
echo "ids remembered by group 0: $ids; forgotten early: $early"
curl -fsS "http://$HTTP/metrics" | grep -E '^quorate_requests_refused_total' || true
awk -v h0="$heap0" -v h="$heap" -v n="$ids" 'BEGIN {printf "live heap %.1f -> %.1f MiB: %.1f bytes per remembered id (all state included)\n", h0/1048576, h/1048576, (h-h0)/n}'
