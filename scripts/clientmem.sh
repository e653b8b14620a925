#!/usr/bin/env bash
# What a million clients cost a node, and whether it gives the memory back
# once they are gone (issue 20, finding 3): a throwaway one-node cluster on
# loopback, run the secure way, is filled with CLIENTS clients (default
# 1,000,000; one cost-1 decision each through the batch API, no request
# ids) under the default policy (10 tokens, 1 a second: each bucket is full
# again a second later), then left until reclaim (every RECLAIM, default
# 5s) has forgotten every bucket. The live heap is read after a forced
# collection (the debug listener's heap profile with gc=1, then the
# runtime's /gc/heap/live:bytes) fresh, full and after reclaim.
# Found with it (2026-12-03, fixed since): after reclaim the heap stayed
# near its peak (3.5 -> 349 -> 302 MiB live), held by the origin memory of
# requests without ids, which a group with no buckets was never reclaimed
# to forget; by the answers of the entries in the log cache, which kept
# their futures; and by the log caches of idle groups.
# Stops only the node it started, by PID.
#   CLIENTS=1000000 scripts/clientmem.sh        (make client-memory)
#   HEAP_PROFILE=heap.pb.gz also saves the heap profile after reclaim
#   (go tool pprof -top heap.pb.gz says what is still held).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
export PATH="$PATH:/usr/local/go/bin"
CLIENTS=${CLIENTS:-1000000}
HTTP=${HTTP:-127.0.0.1:17370}
DEBUG=${DEBUG:-127.0.0.1:17374}

go build -o bin/quorate ./cmd/quorate
go build -o bin/loadgen ./scripts/loadgen
dir=$(mktemp -d)
secure_single "$dir"
# shellcheck disable=SC2046
./bin/quorate serve --data-dir "$dir/data" --http-addr "$HTTP" --raft-addr 127.0.0.1:17371 --gossip-addr 127.0.0.1:17372 \
  --debug-addr "$DEBUG" --reclaim-interval "${RECLAIM:-5s}" --log-level warn $(secure_flags "$dir") ${QUORATE_ARGS:-} 2>"$dir/node.log" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
wait_ready "$HTTP" "$dir/node.log"

auth=(-H "Authorization: Bearer $QUORATE_TOKEN")
# live: the live heap in bytes after a collection.
live() {
  curl -fsS "${auth[@]}" -o /dev/null "http://$DEBUG/debug/pprof/heap?gc=1"
  curl -fsS "${auth[@]}" "http://$DEBUG/debug/runtime-metrics" | grep -o '"/gc/heap/live:bytes":[^,}]*' | cut -d: -f3 |
    awk '{printf "%.0f\n", $1}'
}
buckets() { curl -fsS "${auth[@]}" "http://$HTTP/metrics" | awk '$1 ~ /^quorate_buckets/ {s += $2} END {printf "%.0f\n", s}'; }
# remembered: decisions the groups still remember (by request id or origin).
remembered() { curl -fsS "${auth[@]}" "http://$HTTP/metrics" | awk '$1 ~ /^quorate_requests_remembered/ {s += $2} END {printf "%.0f\n", s}'; }
rss() { awk '/VmRSS/ {printf "%.0f\n", $2*1024}' "/proc/$pid/status"; }
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b/1048576}'; }

sleep 2 # let the groups settle
fresh=$(live); fresh_rss=$(rss)
echo "fresh node: live heap $(mib "$fresh"), RSS $(mib "$fresh_rss")"
echo "filling $CLIENTS clients ..."
./bin/loadgen -targets "http://$HTTP" -c 16 -batch 1000 -keys "$CLIENTS" -each -prefix client -duration 10m -json >"$dir/fill.json"
grep -Eq '"errors": ?0,' "$dir/fill.json" || { echo "the fill had errors:"; cat "$dir/fill.json"; exit 1; }
held=$(buckets)
full=$(live); full_rss=$(rss)
echo "with $held buckets: live heap $(mib "$full"), RSS $(mib "$full_rss")"
echo "waiting for reclaim ..."
for _ in $(seq 1 180); do
  [ "$(buckets)" = 0 ] && break
  sleep 1
done
left=$(buckets)
[ "$left" = 0 ] || { echo "FAIL: $left buckets still held after 180 s"; exit 1; }
# The origin memory lasts 10 s of group time past the last decision, so it
# may outlive the buckets by one reclaim or two.
for _ in $(seq 1 60); do
  [ "$(remembered)" = 0 ] && break
  sleep 1
done
still=$(remembered)
[ "$still" = 0 ] || { echo "FAIL: $still decisions still remembered 60 s after the buckets went"; exit 1; }
# Then each group's log cache goes at the first reclaim that finds nothing
# stored since the one before (two or three RECLAIM intervals).
for _ in $(seq 1 60); do
  [ "$(live)" -le $((2 * fresh)) ] && break
  sleep 1
done
[ -z "${HEAP_PROFILE:-}" ] || curl -fsS "${auth[@]}" -o "$HEAP_PROFILE" "http://$DEBUG/debug/pprof/heap?gc=1"
after=$(live); after_rss=$(rss)
echo
echo "| clients | fresh node | with the clients (per bucket) | after every bucket was reclaimed | after ÷ fresh |"
echo "|---|---|---|---|---|"
printf '| %s | %s live (RSS %s) | %s live, %.0f B/bucket (RSS %s) | %s live (RSS %s) | ×%.2f live (RSS ×%.2f) |\n' \
  "$held" "$(mib "$fresh")" "$(mib "$fresh_rss")" "$(mib "$full")" "$(awk -v a="$full" -v b="$fresh" -v n="$held" 'BEGIN {print (a-b)/n}')" \
  "$(mib "$full_rss")" "$(mib "$after")" "$(mib "$after_rss")" \
  "$(awk -v a="$after" -v b="$fresh" 'BEGIN {print a/b}')" "$(awk -v a="$after_rss" -v b="$fresh_rss" 'BEGIN {print a/b}')"
