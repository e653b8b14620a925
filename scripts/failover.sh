#!/usr/bin/env bash
# Brings up a throwaway 3-node cluster with scripts/cluster.sh (127.0.0.1-3,
# ports 7070-7072, data in a temp dir), measures leader failover with
# scripts/failover, and always tears the cluster down and removes the dir.
#   scripts/failover.sh                  5 runs
#   FAILOVER_ARGS="-runs 10 -json" scripts/failover.sh
# Extra serve flags for every node: QUORATE_ARGS (passed to cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

for i in 1 2 3; do
  if curl -fsS -m 1 "http://127.0.0.$i:7070/healthz" >/dev/null 2>&1; then
    echo "something already serves 127.0.0.$i:7070; stop it first (scripts/cluster.sh down)" >&2
    exit 1
  fi
done

go build -o bin/failover ./scripts/failover
dir=$(mktemp -d "${TMPDIR:-/tmp}/quorate-failover.XXXXXX")
export QUORATE_CLUSTER_DIR="$dir"
fpid=""
cleanup() {
  rc=$?
  trap - EXIT INT TERM
  if [ -n "$fpid" ]; then kill "$fpid" 2>/dev/null || true; wait "$fpid" 2>/dev/null || true; fi
  scripts/cluster.sh down >&2 || true
  if [ "$rc" -ne 0 ]; then
    for f in "$dir"/node*.log; do [ -f "$f" ] && { echo "--- tail $f" >&2; tail -5 "$f" >&2; }; done
  fi
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

scripts/cluster.sh up >&2
# In the background, so that INT/TERM reach the trap at once; the trap
# stops it by PID.
# shellcheck disable=SC2086
./bin/failover -dir "$dir" ${FAILOVER_ARGS:-} &
fpid=$!
rc=0
wait "$fpid" || rc=$?
fpid=""
exit "$rc"
