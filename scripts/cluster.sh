#!/usr/bin/env bash
# A local 3-node quorate cluster on 127.0.0.1, 127.0.0.2 and 127.0.0.3
# (HTTP :7070, raft :7071, gossip :7072, the Envoy rate-limit service over
# gRPC :7073 on each), data and logs under
# $QUORATE_CLUSTER_DIR (default ./cluster-data).
#
#   scripts/cluster.sh up        build, start the nodes, wait until every group has 3 voters
#   scripts/cluster.sh status    each node's state and which groups it leads
#   scripts/cluster.sh kill N    kill -9 node N (1..3)
#   scripts/cluster.sh start N   start node N again (same data dir and addresses)
#   scripts/cluster.sh down      stop every node it started (SIGTERM, by PID)
#
# Nodes run the secure way: a cluster CA, one certificate per node and a
# gossip key, written by `quorate certs init` into $DIR/certs on first use.
# INSECURE=1 runs them with --insecure instead.
#
# Extra serve flags for every node: QUORATE_ARGS="--groups 8".
# DEBUG_PORT=7079 serves each node's pprof profiles on 127.0.0.N:7079.
# IP_BASE=10 puts node N on 127.0.0.(10+N) instead, so that two clusters
# (say, two builds being compared) can run side by side.
#
# The API takes tokens: `up` writes $DIR/auth.json with one admin token,
# kept in $DIR/token, new for every cluster (export QUORATE_TOKEN=$(cat
# $DIR/token) for the CLI; quorate token new --auth-file $DIR/auth.json adds
# more, loaded by the nodes on SIGHUP).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
DIR=${QUORATE_CLUSTER_DIR:-cluster-data}
NODES=${NODES:-3}
BIN=bin/quorate

ip() { echo "127.0.0.$(( ${IP_BASE:-0} + $1 ))"; }
pidfile() { echo "$DIR/node$1.pid"; }
# running N: node N's process exists and is not a zombie (a killed process
# can linger as one until its new parent reaps it).
running() {
  local p st
  p=$(cat "$(pidfile "$1")" 2>/dev/null) || return 1
  st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

# ensure_auth makes the auth file and admin token if the cluster has none.
ensure_auth() {
  [ -s "$DIR/auth.json" ] && [ -s "$DIR/token" ] && return
  rm -f "$DIR/auth.json"
  (umask 077; "$BIN" token new --name cluster-sh --role admin --auth-file "$DIR/auth.json" 2>/dev/null >"$DIR/token")
}
token() { cat "$DIR/token"; }

# certs_init writes the CA, every node's certificate and the gossip key
# into $DIR/certs, unless they are there already.
certs_init() {
  [ -f "$DIR/certs/ca.pem" ] && return 0
  local nodes="" hosts="" i
  for i in $(seq 1 "$NODES"); do
    nodes+="${nodes:+,}node$i"; hosts+="${hosts:+,}node$i=$(ip "$i")"
  done
  "$BIN" certs init --dir "$DIR/certs" --nodes "$nodes" --hosts "$hosts" >/dev/null
}

# security_args prints node $1's cluster security flags.
security_args() {
  if [ "${INSECURE:-}" = 1 ]; then echo "--insecure"; return; fi
  local c="$DIR/certs"
  echo "--cluster-ca $c/ca.pem --cluster-cert $c/node$1.pem --cluster-key $c/node$1-key.pem --gossip-key $c/gossip.key"
}

start() {
  local i=$1 join=""
  [ "$i" -ne 1 ] && join="--join $(ip 1):7072"
  if running "$i"; then echo "node$i already running (pid $(cat "$(pidfile "$i")"))"; return; fi
  mkdir -p "$DIR/node$i"
  ensure_auth
  [ "${INSECURE:-}" = 1 ] || certs_init
  # A restarted first node rejoins through the others.
  if [ "$i" -eq 1 ] && [ -f "$DIR/node1/quorate.json" ]; then join="--join $(ip 2):7072,$(ip 3):7072"; fi
  # shellcheck disable=SC2086
  nohup "$BIN" serve --node-id "node$i" --data-dir "$DIR/node$i" \
    --http-addr "$(ip "$i"):7070" --raft-addr "$(ip "$i"):7071" --gossip-addr "$(ip "$i"):7072" --grpc-addr "$(ip "$i"):7073" \
    --auth-file "$DIR/auth.json" $join $(security_args "$i") \
    ${DEBUG_PORT:+--debug-addr "$(ip "$i"):$DEBUG_PORT"} ${QUORATE_ARGS:-} >>"$DIR/node$i.log" 2>&1 &
  echo $! >"$(pidfile "$i")"
  echo "node$i started (pid $!, http://$(ip "$i"):7070, log $DIR/node$i.log)"
}

wait_ready() {
  local i=$1
  for _ in $(seq 1 150); do
    curl -fsS "http://$(ip "$i"):7070/readyz" >/dev/null 2>&1 && return 0
    running "$i" || { echo "node$i exited; see $DIR/node$i.log" >&2; tail -20 "$DIR/node$i.log" >&2; return 1; }
    sleep 0.1
  done
  echo "node$i not ready after 15 s; see $DIR/node$i.log" >&2
  return 1
}

# wait_voters waits until every group lists $1 voters.
wait_voters() {
  local want=$1
  for _ in $(seq 1 300); do
    if QUORATE_TOKEN=$(token) "$BIN" status --json --addr "$(ip 1):7070" 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if all(len(g.get("voters") or []) == int(sys.argv[1]) and g.get("leader") for g in s["groups"]) else 1)' "$want"; then
      return 0
    fi
    sleep 0.1
  done
  echo "groups did not reach $want voters in 30 s" >&2
  return 1
}

case "${1:-}" in
  up)
    for i in $(seq 1 "$NODES"); do
      if curl -fsS -m 1 "http://$(ip "$i"):7070/healthz" >/dev/null 2>&1; then
        echo "something already answers on $(ip "$i"):7070; is another cluster running?" >&2; exit 1
      fi
    done
    go build -o "$BIN" ./cmd/quorate
    mkdir -p "$DIR"
    start 1; wait_ready 1
    for i in $(seq 2 "$NODES"); do start "$i"; done
    for i in $(seq 2 "$NODES"); do wait_ready "$i"; done
    wait_voters "$(( NODES < 3 ? NODES : 3 ))"
    echo "cluster up:$(for i in $(seq 1 "$NODES"); do printf ' http://%s:7070' "$(ip "$i")"; done)"
    echo "admin token: export QUORATE_TOKEN=\$(cat $DIR/token)"
    ;;
  start)
    start "${2:?node number}"; wait_ready "$2"
    ;;
  kill)
    i=${2:?node number}
    p=$(cat "$(pidfile "$i")")
    kill -9 "$p" && echo "node$i (pid $p) killed with SIGKILL"
    ;;
  status)
    for i in $(seq 1 "$NODES"); do
      if running "$i"; then
        leads=$(QUORATE_TOKEN=$(token) "$BIN" status --json --addr "$(ip "$i"):7070" 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(",".join(g["id"] for g in s["groups"] if g["state"] == "Leader") or "-")' || echo "?")
        echo "node$i up   pid $(cat "$(pidfile "$i")")  leads groups: $leads"
      else
        echo "node$i down"
      fi
    done
    ;;
  down)
    for i in $(seq 1 "$NODES"); do
      if running "$i"; then
        p=$(cat "$(pidfile "$i")"); kill "$p"
        for _ in $(seq 1 100); do running "$i" || break; sleep 0.1; done
        echo "node$i stopped"
      fi
      rm -f "$(pidfile "$i")"
    done
    ;;
  *)
    sed -n '2,21p' "$0"; exit 2
    ;;
esac
