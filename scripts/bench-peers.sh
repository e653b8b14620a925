#!/usr/bin/env bash
# Measures, in one invocation and with one load generator (scripts/loadgen),
# the same workloads against:
#   ceiling            scripts/ceiling: quorate's HTTP API and bucket math in
#                      memory, unreplicated, no log (what HTTP + a decision cost here)
#   quorate-1 STORE    one node, --log-store STORE for each of LOG_STORES
#   quorate-3 STORE    a 3-node cluster (scripts/cluster.sh), connections spread
#                      over the nodes, the first of LOG_STORES; with mutual TLS
#                      and encrypted gossip, then again without ("no TLS");
#                      each round-robin, then through the Go client (loadgen
#                      -mode client: every decision sent to its group's leader
#                      from GET /v1/routes), coalesced and not
#   quorate-1 client   the first store's node through the Go client, coalesced and
#                      not, alternated PAIRS times like the gRPC rows
#   ..., gRPC          the first store's node and the 3-node cluster through the
#                      Envoy rate-limit service (serve --grpc-addr), as Envoy calls it;
#                      over 10,000 keys each gRPC run follows an HTTP run of the same
#                      workload on the same nodes, PAIRS times, and the table shows
#                      the median run of each and the gRPC/HTTP ratio run by run
# and with PEERS=1 also the limiters one would pick instead, installed when
# missing (Debian's redis-server with apt-get; gubernator with go install):
#   redis              Redis 7, one node, AOF with appendfsync always, a Lua token bucket
#   gubernator-1, -3   gubernator v2.13.0 on 1 and on 3 nodes (memberlist), LEAKY_BUCKET
# Every target decides under quorate's built-in default policy (10 tokens,
# 1 per second). Each workload runs CONNS connections x KEYSPACES keys (10000:
# uniform over 10,000 ids; 1: a single hot key), one decision per call, plus
# BATCH_CONNS connections of BATCH-decision POST /v1/allow/batch calls on the
# ceiling and the single nodes. It prints one markdown table (decisions/s,
# p50/p99 per call, server CPU per decision summed over the target's processes,
# decisions per raft entry and per fsync from quorate's /metrics, and the ratio
# to the ceiling under the same workload) and writes every run as JSON to
# $RESULTS. Loopback addresses only; everything it starts is stopped by PID on
# exit, and its temp dir removed.
#
#   scripts/bench-peers.sh                    (make bench-peers)
#   PEERS=1 DURATION=8s scripts/bench-peers.sh
#
# Knobs: DURATION (8s per run), CONNS ("64 8"), KEYSPACES ("10000 1"),
# CLIENT_CONNS (64 goroutines in the client rows), PAIRS (3: HTTP and gRPC
# runs, and coalesced and one-call client runs, alternated; one 8 s run
# here varies by 10-15% from the next),
# BATCH_CONNS (16), BATCH (1000), PEERS (0), RESULTS (JSON file), QUORATE_ARGS
# (extra serve flags for every node), LOG_STORES ("shared boltdb"; "default"
# passes no --log-store, for binaries that lack the flag), SECURITY_MODES
# ("tls insecure": the 3-node cluster with cluster TLS and gossip encryption,
# then without, to measure what they cost), LEDGER (1: the cost ledger, see
# below; 0 leaves it out).
#
# The cost ledger: on every quorate run of 64 connections over 10,000 keys,
# one decision per call, loadgen -ledger profiles each node through its
# debug listener over the middle half of the run and splits the nodes' CPU
# per decision by stage (HTTP, admission, raft, log store, fsync, transport,
# TLS, FSM, id memory, GC, scheduler), with allocations, wake-ups, syscalls
# and context switches per decision and per raft entry, printed after the
# table. Profiling at 100 Hz costs the nodes under 1% of their CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
DURATION=${DURATION:-8s}
CONNS=${CONNS:-64 8}
KEYSPACES=${KEYSPACES:-10000 1}
BATCH_CONNS=${BATCH_CONNS:-16}
BATCH=${BATCH:-1000}
CLIENT_CONNS=${CLIENT_CONNS:-64}
PAIRS=${PAIRS:-3}
PEERS=${PEERS:-0}
LOG_STORES=${LOG_STORES:-shared boltdb}
SECURITY_MODES=${SECURITY_MODES:-tls insecure}
LEDGER=${LEDGER:-1}
LEDGER_URLS="" # the debug listeners of the nodes under test, in the order of their PIDs
RESULTS=${RESULTS:-${TMPDIR:-/tmp}/quorate-bench-peers-$(date +%Y%m%d-%H%M%S).json}
GUBERNATOR_VERSION=v2.13.0

CEILING=127.0.0.1:17080
SINGLE=127.0.0.1:17070 # raft :17071, gossip :17072
CLUSTER=(127.0.0.1:7070 127.0.0.2:7070 127.0.0.3:7070)
REDIS=127.0.0.1:17379
GUBER_IPS=(127.0.0.1 127.0.0.2 127.0.0.3) # HTTP :17050, gRPC :17051, memberlist :17052

# listening HOST:PORT: something accepts TCP connections there.
listening() { timeout 1 bash -c "exec 3<>/dev/tcp/${1%:*}/${1##*:}" 2>/dev/null; }
for a in "$CEILING" "$SINGLE" "${CLUSTER[@]}" "$REDIS" "${GUBER_IPS[@]/%/:17050}"; do
  if listening "$a"; then
    echo "something already listens on $a; stop it first" >&2
    exit 1
  fi
done

go build -o bin/quorate ./cmd/quorate
go build -o bin/loadgen ./scripts/loadgen
go build -o bin/ceiling ./scripts/ceiling
dir=$(mktemp -d "${TMPDIR:-/tmp}/quorate-peers.XXXXXX")
runs="$dir/runs.json"
: >"$runs"
notes=()
pids=()         # every process started here (not the cluster's), stopped by PID
cluster_up=""

# stop PID...: SIGTERM, up to 5 s to exit, then SIGKILL; reaps them.
stop() {
  local p
  for p in "$@"; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 1 50); do
    local alive=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && ! grep -q '^[^)]*) Z' "/proc/$p/stat" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in "$@"; do
    kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  local keep=() q
  for q in "${pids[@]}"; do [[ " $* " == *" $q "* ]] || keep+=("$q"); done
  pids=("${keep[@]}")
}

cleanup() {
  rc=$?
  trap - EXIT INT TERM
  [ "${#pids[@]}" -gt 0 ] && stop "${pids[@]}"
  [ -n "$cluster_up" ] && { scripts/cluster.sh down >/dev/null 2>&1 || true; } # QUORATE_CLUSTER_DIR is the running one
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_http URL LOG [TEST]: until URL answers 200 (and its body matches TEST), 30 s at most.
wait_http() {
  for _ in $(seq 1 300); do
    if body=$(curl -fsS -m 1 "$1" 2>/dev/null) && [[ -z "${3:-}" || "$body" =~ $3 ]]; then return 0; fi
    sleep 0.1
  done
  echo "$1 not ready after 30 s; log:" >&2
  tail -20 "$2" >&2
  return 1
}

# measure LABEL MODE TARGETS PIDS METRICS CONNS KEYS BATCH: one run, appended to $runs.
measure() {
  local label=$1 mode=$2 targets=$3 ps=$4 metrics=$5 conns=$6 keys=$7 batch=$8
  local ledger=()
  if [ "$LEDGER" = 1 ] && [ -n "$LEDGER_URLS" ] && [ "$conns" = 64 ] && [ "$keys" = 10000 ] && [ "$batch" = 1 ]; then
    ledger=(-ledger "$LEDGER_URLS")
  fi
  printf '  %-18s %3s conns, %5s keys, batch %4s: ' "$label" "$conns" "$keys" "$batch" >&2
  ./bin/loadgen -label "$label" -mode "$mode" -targets "$targets" -pids "$ps" -metrics "$metrics" \
    -c "$conns" -keys "$keys" -batch "$batch" -duration "$DURATION" -prefix "k$conns-$keys-$batch" "${ledger[@]}" ${LOADGEN_ARGS:-} -json >"$dir/run.json"
  cat "$dir/run.json" >>"$runs"
  awk -F': ' '/"per_second"/ {printf "%.0f decisions/s\n", $2}' "$dir/run.json" >&2
}

# workloads LABEL MODE TARGETS PIDS METRICS [batch]: every CONNS x KEYSPACES
# run, and the batch run when asked. With GRPC_TARGETS, each run over
# 10,000 keys is followed by the same workload over gRPC ("LABEL, gRPC",
# loadgen -mode envoy: one descriptor per call, the callers sharing two
# HTTP/2 connections per node as Envoy's worker threads would), the pair
# PAIRS times.
workloads() {
  local keys conns i
  for keys in $KEYSPACES; do
    for conns in $CONNS; do
      if [ -n "${GRPC_TARGETS:-}" ] && [ "$keys" = 10000 ]; then
        for i in $(seq 1 "$PAIRS"); do
          measure "$1" "$2" "$3" "$4" "$5" "$conns" "$keys" 1
          measure "$1, gRPC" envoy "$GRPC_TARGETS" "$4" "$5" "$conns" "$keys" 1
        done
      else
        measure "$1" "$2" "$3" "$4" "$5" "$conns" "$keys" 1
      fi
    done
  done
  if [ "${6:-}" = batch ]; then
    measure "$1" "$2" "$3" "$4" "$5" "$BATCH_CONNS" 10000 "$BATCH"
  fi
}

# client_rows LABEL TARGETS PIDS METRICS: CLIENT_CONNS goroutines of one
# process deciding through the Go client (package client) over 10,000 keys,
# coalesced, then one call a decision, the pair PAIRS times; the table
# shows the median run of each and the ratios run by run.
client_rows() {
  local i
  for i in $(seq 1 "$PAIRS"); do
    LOADGEN_ARGS=-coalesce=true measure "$1, client, coalesced" client "$2" "$3" "$4" "$CLIENT_CONNS" 10000 1
    LOADGEN_ARGS=-coalesce=false measure "$1, client" client "$2" "$3" "$4" "$CLIENT_CONNS" 10000 1
  done
}

store_flag() { [ "$1" = default ] && return; printf -- '--log-store %s' "$1"; }
store_label() { [ "$1" = default ] && return; printf ' %s' "$1"; }

echo "== bench-peers: $DURATION per run, $(nproc) cores shared by the servers and the load generator" >&2

# The ceiling.
./bin/ceiling -addr "$CEILING" 2>"$dir/ceiling.log" &
pid=$!; pids+=("$pid")
wait_http "http://$CEILING/readyz" "$dir/ceiling.log"
workloads ceiling quorate "http://$CEILING" "$pid" "" batch
stop "$pid"

# quorate, one node per log store.
for store in $LOG_STORES; do
  mkdir -p "$dir/single-$store"
  # shellcheck disable=SC2046,SC2086
  ./bin/quorate serve --node-id bench --data-dir "$dir/single-$store/data" --http-addr "$SINGLE" \
    --raft-addr 127.0.0.1:17071 --gossip-addr 127.0.0.1:17072 --grpc-addr 127.0.0.1:17073 --debug-addr 127.0.0.1:17074 --log-level warn \
    $(store_flag "$store") ${QUORATE_ARGS:-} 2>"$dir/single-$store/node.log" &
  pid=$!; pids+=("$pid")
  wait_http "http://$SINGLE/readyz" "$dir/single-$store/node.log"
  LEDGER_URLS=http://127.0.0.1:17074
  grpc=""; [ "$store" = "${LOG_STORES%% *}" ] && grpc=grpc://127.0.0.1:17073
  GRPC_TARGETS=$grpc workloads "quorate-1$(store_label "$store")" quorate "http://$SINGLE" "$pid" "http://$SINGLE" batch
  if [ -n "$grpc" ]; then
    client_rows "quorate-1$(store_label "$store")" "http://$SINGLE" "$pid" "http://$SINGLE"
  fi
  stop "$pid"
  LEDGER_URLS=""
done

# quorate, 3 nodes, with the first log store: as scripts/cluster.sh runs
# them (mutual TLS between nodes, encrypted gossip) and, to show what that
# costs, with INSECURE=1 (plain TCP).
store=${LOG_STORES%% *}
for security in $SECURITY_MODES; do
  export QUORATE_CLUSTER_DIR="$dir/cluster-$security"
  cluster_up=1
  label="quorate-3$(store_label "$store")"
  insecure=""
  if [ "$security" = insecure ]; then insecure=1; label+=", no TLS"; fi
  DEBUG_PORT=7079 INSECURE=$insecure QUORATE_ARGS="${QUORATE_ARGS:-} $(store_flag "$store")" scripts/cluster.sh up >"$dir/cluster-up.log" 2>&1 ||
    { cat "$dir/cluster-up.log" >&2; exit 1; }
  cpids=$(cat "$QUORATE_CLUSTER_DIR"/node{1,2,3}.pid | paste -sd,)
  LEDGER_URLS=$(printf 'http://%s:7079,' "${CLUSTER[@]%:*}"); LEDGER_URLS=${LEDGER_URLS%,}
  urls=$(printf 'http://%s,' "${CLUSTER[@]}"); urls=${urls%,}
  grpcs=$(printf 'grpc://%s:7073,' "${CLUSTER[@]%:*}"); grpcs=${grpcs%,}
  QUORATE_TOKEN=$(cat "$QUORATE_CLUSTER_DIR/token") GRPC_TARGETS=$grpcs workloads "$label" quorate "$urls" "$cpids" "$urls"
  # Again through the Go client: each decision straight to its group's
  # leader (GET /v1/routes), no forwarding hop; coalesced, then one call each.
  QUORATE_TOKEN=$(cat "$QUORATE_CLUSTER_DIR/token") client_rows "$label" "$urls" "$cpids" "$urls"
  scripts/cluster.sh down >/dev/null
  cluster_up=""
  LEDGER_URLS=""
done

if [ "$PEERS" = 1 ]; then
  # Redis: Debian's redis-server, AOF fsynced before every reply.
  if ! command -v redis-server >/dev/null; then
    echo "installing Debian's redis-server with apt-get" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } ||
      notes+=("redis: apt-get install redis-server failed; Redis was not measured")
  fi
  if command -v redis-server >/dev/null; then
    mkdir -p "$dir/redis"
    redis-server --bind 127.0.0.1 --port "${REDIS#*:}" --dir "$dir/redis" --daemonize no --protected-mode yes \
      --appendonly yes --appendfsync always --save '' --logfile "$dir/redis/redis.log" &
    pid=$!; pids+=("$pid")
    for _ in $(seq 1 100); do
      [ "$(redis-cli -h 127.0.0.1 -p "${REDIS#*:}" ping 2>/dev/null)" = PONG ] && break
      sleep 0.1
    done
    notes+=("redis: $(redis-server --version | awk '{print $3}'), 1 node, appendonly yes, appendfsync always")
    workloads redis redis "redis://$REDIS" "$pid" ""
    stop "$pid"
  fi

  # Gubernator: one process per node. Memberlist names a node by its host
  # name, so each node runs in its own UTS namespace (unshare, root) with a
  # host name of its own, as in gubernator's docker-compose; the network is
  # the host's.
  gobin=$(go env GOBIN); gobin=${gobin:-$(go env GOPATH)/bin}
  guber="$gobin/gubernator"
  if ! go version -m "$guber" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/gubernator-io/gubernator/v2[[:space:]]+$GUBERNATOR_VERSION"; then
    echo "installing gubernator $GUBERNATOR_VERSION with go install (a few minutes)" >&2
    go install "github.com/gubernator-io/gubernator/v2/cmd/gubernator@$GUBERNATOR_VERSION" ||
      notes+=("gubernator: go install failed; Gubernator was not measured")
  fi
  if [ -x "$guber" ]; then
    notes+=("gubernator: $GUBERNATOR_VERSION, memberlist discovery, LEAKY_BUCKET limit 10 per 10 s, burst 10")
    for n in 1 3; do
      if [ "$n" -gt 1 ] && ! unshare --uts true 2>/dev/null; then
        notes+=("gubernator-$n: needs unshare --uts (root) to give each node its own host name; not measured")
        continue
      fi
      gp=()
      for i in $(seq 1 "$n"); do
        ip=${GUBER_IPS[$((i - 1))]}
        own_name=(unshare --uts sh -c 'hostname "$1" && exec "$2"' sh "bench-guber$i")
        [ "$n" -gt 1 ] || unshare --uts true 2>/dev/null || own_name=()
        env GUBER_HTTP_ADDRESS="$ip:17050" GUBER_GRPC_ADDRESS="$ip:17051" GUBER_ADVERTISE_ADDRESS="$ip:17051" \
          GUBER_MEMBERLIST_ADDRESS="$ip:17052" GUBER_MEMBERLIST_BIND_ADDRESS="$ip:17052" \
          GUBER_MEMBERLIST_KNOWN_NODES="${GUBER_IPS[0]}:17052" GUBER_LOG_LEVEL=warn OTEL_TRACES_EXPORTER=none \
          "${own_name[@]}" "$guber" >"$dir/guber$n-$i.log" 2>&1 &
        gp+=("$!"); pids+=("$!")
        if [ "$i" = 1 ]; then wait_http "http://$ip:17050/v1/HealthCheck" "$dir/guber$n-$i.log"; fi
      done
      for i in $(seq 1 "$n"); do
        wait_http "http://${GUBER_IPS[$((i - 1))]}:17050/v1/HealthCheck" "$dir/guber$n-$i.log" "\"peer_count\":$n[,}]"
      done
      urls=$(printf 'http://%s:17050,' "${GUBER_IPS[@]:0:$n}"); urls=${urls%,}
      workloads "gubernator-$n" gubernator "$urls" "$(IFS=,; echo "${gp[*]}")" ""
      stop "${gp[@]}"
    done
  fi
fi

echo >&2
./bin/loadgen report -out "$RESULTS" "$runs"
cat <<EOF

Targets: ceiling = the same HTTP handler and bucket math in memory, no log, no replication;
quorate-1 = one node, every decision in an fsynced raft entry (group commit); quorate-3 = three
replicas on this machine, a majority fsyncs each entry. CPU µs/decision sums the target's
processes; decisions/fsync counts every node's syncs (quorate_log_syncs_total; "-" if absent).
$(nproc) cores are shared by the servers and the load generator; p50/p99 are per call.
EOF
if [ "$PEERS" = 1 ]; then
  cat <<EOF
redis = one process, a Lua token bucket, AOF fsynced before replies (appendfsync always), no
replica. gubernator = state in memory only (no persistence, no replication); each key is decided
by the node that owns it, the others forward.
EOF
fi
for n in "${notes[@]}"; do echo "note: $n"; done
echo "results: $RESULTS"
