#!/usr/bin/env bash
# Backup and restore of one node holding CLIENTS clients (default
# 1,000,000), on loopback, run the secure way (cluster certificate, gossip
# key, an admin token). It fills the node with one cost-1 decision per
# client under a default policy that never refills (so nothing is
# reclaimed), takes a backup of the live node with `quorate backup`, stops
# it, restores the backup into a new data dir, starts a node there (with
# reclaim off, so nothing changes its groups), backs that up, and requires
# every data group of both backups to hold identical bytes: every balance,
# assignment and remembered id exactly. Prints the times and sizes.
# Stops only the node it started, by PID.
#   CLIENTS=1000000 scripts/backup-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
export PATH="$PATH:/usr/local/go/bin"
CLIENTS=${CLIENTS:-1000000}
HTTP=${HTTP:-127.0.0.1:17270}
RAFT=${RAFT:-127.0.0.1:17271}
GOSSIP=${GOSSIP:-127.0.0.1:17272}

go build -o bin/quorate ./cmd/quorate
go build -o bin/loadgen ./scripts/loadgen
dir=$(mktemp -d)
pid=
stop_node() { [ -n "$pid" ] || return 0; kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; }
cleanup() { stop_node; rm -rf "$dir"; }
trap cleanup EXIT INT TERM

secure_single "$dir"
export QUORATE_ADDR=$HTTP
start_node() {
  # shellcheck disable=SC2046,SC2086
  ./bin/quorate serve --data-dir "$1" --http-addr "$HTTP" --raft-addr "$RAFT" --gossip-addr "$GOSSIP" \
    $(secure_flags "$dir") --log-level warn ${2:-} 2>>"$dir/node.log" &
  pid=$!
  wait_ready "$HTTP" "$dir/node.log"
}
rss() { awk '/VmRSS/ {printf "%d MiB", $2/1024}' "/proc/$pid/status"; }
seconds() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", (b-a)/1e9}'; }

start_node "$dir/data"
./bin/quorate default set --capacity 10 --rate 0 >/dev/null
echo "filling $CLIENTS clients ..."
./bin/loadgen -targets "http://$HTTP" -c 16 -batch 1000 -keys "$CLIENTS" -each -prefix client -duration 10m -json >"$dir/fill.json"
grep -Eq '"errors": ?0,' "$dir/fill.json" || { echo "the fill had errors:"; cat "$dir/fill.json"; exit 1; }
echo "node RSS with $CLIENTS clients: $(rss)"

t0=$(date +%s%N)
./bin/quorate backup --out "$dir/before.qbak" >"$dir/backup.txt"
t1=$(date +%s%N)
cat "$dir/backup.txt"
stop_node

t2=$(date +%s%N)
./bin/quorate restore --from "$dir/before.qbak" --data-dir "$dir/restored" --node-id node1 --raft-addr "$RAFT" >/dev/null
t3=$(date +%s%N)
start_node "$dir/restored" "--reclaim-interval -1s"
t4=$(date +%s%N)
./bin/quorate backup --out "$dir/after.qbak" >/dev/null

# Data groups: the number, clients and SHA-256 columns of the summary.
groups() { ./bin/quorate restore --from "$1" --check | awk '$1 ~ /^[0-9]+$/ && length($NF) == 16 && $NF ~ /^[0-9a-f]+$/ {print $1, $2, $NF}'; }
[ "$(groups "$dir/before.qbak" | wc -l)" -eq 8 ] || { echo "FAIL: expected 8 data groups in the summary:"; groups "$dir/before.qbak"; exit 1; }
if ! diff <(groups "$dir/before.qbak") <(groups "$dir/after.qbak"); then
  echo "FAIL: the restored node's groups differ from the backup's"
  exit 1
fi
clients=$(groups "$dir/before.qbak" | awk '{s += $2} END {print s}')
[ "$clients" -eq "$CLIENTS" ] || { echo "FAIL: $clients clients in the backup, $CLIENTS filled"; exit 1; }
size=$(stat -c %s "$dir/before.qbak")
echo
echo "| clients | backup file | quorate backup | quorate restore | restored node ready | groups identical after restore |"
echo "|---|---|---|---|---|---|"
printf '| %s | %s MiB (%s B/client) | %s s | %s s | %s s | yes (%s data groups, SHA-256) |\n' "$CLIENTS" \
  "$(awk -v s="$size" 'BEGIN {printf "%.1f", s/1048576}')" "$(awk -v s="$size" -v n="$CLIENTS" 'BEGIN {printf "%.0f", s/n}')" \
  "$(seconds "$t0" "$t1")" "$(seconds "$t2" "$t3")" "$(seconds "$t3" "$t4")" "$(groups "$dir/before.qbak" | wc -l)"
