#!/usr/bin/env bash
# The connection attacks of issue 20 (findings 2, 4 and 5) against a
# throwaway secure 3-node cluster on loopback (scripts/cluster.sh: cluster
# TLS, gossip key, tokens), each while a legitimate caller decides through
# all three nodes (scripts/loadgen, 8 connections, 10,000 keys):
#   hello  a recorded TLS ClientHello replayed on RATE (default 4,000) new
#          connections a second to node 1's raft port, from one address;
#   idle   CONNS (default 20,000; the attacker's descriptor limit is raised
#          to fit them where the system allows) connections to node 1's HTTP port from 20 addresses,
#          each after one unauthenticated GET /healthz, reopened when closed;
#   gossip GOSSIP_CONNS (default 1,000) connections to node 1's gossip port
#          from 20 addresses, each announcing a 20 MiB message and sending
#          2 MiB of it without the gossip key, reopened when closed.
# For each: what the attacker managed, the legitimate decisions answered,
# their p99, the elections (new raft terms) during the attack, and how
# far node 1's RSS rose above where it was when the attack began.
# Stops only the nodes it started, by PID (scripts/cluster.sh down).
#   DURATION=20s RATE=4000 CONNS=20000 scripts/flood.sh        (make flood)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
DURATION=${DURATION:-20s}
RATE=${RATE:-4000}
CONNS=${CONNS:-20000}
GOSSIP_CONNS=${GOSSIP_CONNS:-1000}
go build -o bin/quorate ./cmd/quorate
go build -o bin/loadgen ./scripts/loadgen
go build -o bin/flood ./scripts/flood
dir=$(mktemp -d)
export QUORATE_CLUSTER_DIR=$dir/cluster
cleanup() { scripts/cluster.sh down >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
scripts/cluster.sh up >"$dir/up.log" 2>&1 || { cat "$dir/up.log"; exit 1; }
QUORATE_TOKEN=$(cat "$QUORATE_CLUSTER_DIR/token")
export QUORATE_TOKEN
nodes=(127.0.0.1 127.0.0.2 127.0.0.3)
urls=$(printf 'http://%s:7070,' "${nodes[@]}"); urls=${urls%,}

# terms: every group's raft term summed over the nodes.
terms() {
  local n s=0 t
  for n in "${nodes[@]}"; do
    t=$(curl -fsS -H "Authorization: Bearer $QUORATE_TOKEN" "http://$n:7070/metrics" |
      awk '$1 ~ /^quorate_raft_term/ {s += $2} END {printf "%.0f", s}')
    s=$((s + t))
  done
  echo "$s"
}
# field FILE NAME: a number from a JSON file.
field() { grep -o "\"$2\": *[0-9.e+-]*" "$1" | head -1 | awk -F': *' '{print $2}'; }
secs=${DURATION%s}

rows=()
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$(cat "$QUORATE_CLUSTER_DIR/node1.pid")/status"; }
for attack in hello idle gossip; do
  # The legitimate caller runs 4 s longer than the attack, which starts 2 s in.
  ./bin/loadgen -targets "$urls" -c 8 -keys 10000 -duration "$((secs + 4))s" -prefix "legit-$attack" -json >"$dir/legit.json" &
  lg=$!
  sleep 2
  t0=$(terms)
  rss0=$(rss)
  (peak=$rss0; while [ ! -e "$dir/stop-rss" ]; do r=$(rss); [ "$r" -gt "$peak" ] && peak=$r; echo "$peak" >"$dir/peak"; sleep 0.2; done) &
  sampler=$!
  case $attack in
    hello) ./bin/flood -attack hello -addr 127.0.0.1:7071 -from 127.0.0.50 -rate "$RATE" -duration "$DURATION" >"$dir/flood.json" ;;
    idle) (ulimit -n $((CONNS + 1000)) 2>/dev/null || echo "flood: could not raise the descriptor limit above $(ulimit -n)" >&2
      exec ./bin/flood -attack idle -addr 127.0.0.1:7070 -from 127.0.0.60 -sources 20 -conns "$CONNS" -duration "$DURATION" >"$dir/flood.json") ;;
    gossip) ./bin/flood -attack gossip -addr 127.0.0.1:7072 -from 127.0.0.90 -sources 20 -conns "$GOSSIP_CONNS" -duration "$DURATION" >"$dir/flood.json" ;;
  esac
  t1=$(terms)
  touch "$dir/stop-rss"; wait "$sampler"; rm -f "$dir/stop-rss"
  added=$(awk -v p="$(cat "$dir/peak")" -v b="$rss0" 'BEGIN {printf "%.1f MiB", (p-b)/1048576}')
  wait "$lg"
  req=$(field "$dir/legit.json" requests); ok=$(( $(field "$dir/legit.json" allowed) + $(field "$dir/legit.json" denied) ))
  p99=$(field "$dir/legit.json" p99_us)
  if [ "$attack" = hello ]; then
    managed="$(field "$dir/flood.json" dials_per_second | awk '{printf "%.0f", $1}') connections/s ($(field "$dir/flood.json" dials) in total)"
  else
    managed="$(field "$dir/flood.json" most_held) held at once, $(field "$dir/flood.json" closed_by_node) closed by the node, $(field "$dir/flood.json" dials) opened"
  fi
  rows+=("$(printf '| %s | %s | %s of %s (%s) | %s ms | %s | %s |' "$attack" "$managed" "$ok" "$req" \
    "$(awk -v a="$ok" -v b="$req" 'BEGIN {printf "%.2f%%", 100*a/b}')" "$(awk -v p="$p99" 'BEGIN {printf "%.1f", p/1000}')" "$((t1 - t0))" "$added")")
  sleep 6 # let the closed connections drain before the next attack
done
echo
echo "| attack ($DURATION) | the attacker managed | legitimate decisions answered | their p99 | new raft terms | node 1's RSS added (peak) |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
