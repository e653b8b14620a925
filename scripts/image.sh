#!/usr/bin/env bash
# Builds the container image localhost/quorate:$VERSION (and :latest) with
# podman, installing Debian's podman when missing: a static binary and an
# empty data dir on an empty base (deploy/image/Containerfile), so nothing
# is pulled from a registry. Then runs it: a node on a published loopback
# port with an API token, which must become ready and decide, and is
# stopped by its container id.
#
# Some sandboxes refuse every setrlimit a container runtime makes while it
# starts a container ("setrlimit RLIMIT_NOFILE: Operation not permitted"):
# there the run retries with runc and limits below the current ones,
# RUN_ARGS (default "--runtime runc --ulimit nofile=1024:1024 --ulimit
# nproc=1024:1024"), and says so.
#   VERSION=v0.15.0 scripts/image.sh          (make image)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
if ! command -v podman >/dev/null; then
  echo "installing Debian's podman with apt-get" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman >/dev/null
fi
ctx=bin/image
rm -rf "$ctx" && mkdir -p "$ctx/data"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/quorate/quorate/internal/version.Binary=$VERSION" -o "$ctx/quorate" ./cmd/quorate
cp deploy/image/Containerfile "$ctx/"
podman build --pull=never -t "localhost/quorate:$VERSION" -t localhost/quorate:latest "$ctx"
podman image inspect localhost/quorate:latest --format 'image {{.Id}}: {{.Size}} bytes, user {{.Config.User}}'

args=()
if ! podman run --rm localhost/quorate:latest version 2>"$ctx/run.err"; then
  grep -q setrlimit "$ctx/run.err" || { cat "$ctx/run.err" >&2; exit 1; }
  echo "this machine refuses the runtime's setrlimit ($(tail -1 "$ctx/run.err")); running with ${RUN_ARGS:=--runtime runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024}" >&2
  command -v runc >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc >/dev/null
  read -r -a args <<<"$RUN_ARGS"
  podman run "${args[@]}" --rm localhost/quorate:latest version
fi
auth=$(mktemp -d)
chmod 0755 "$auth"
bin/image/quorate token new --name image-check --role admin --auth-file "$auth/auth.json" 2>/dev/null >"$auth/token"
chmod 0644 "$auth/auth.json" # the image runs as uid 65532
port=${PORT:-17570}
cid=$(podman run "${args[@]}" -d --rm -p "127.0.0.1:$port:7070" -v "$auth:/auth:ro" localhost/quorate:latest \
  serve --data-dir /data --http-addr 0.0.0.0:7070 --auth-file /auth/auth.json)
trap 'podman stop -t 5 "$cid" >/dev/null 2>&1 || true; rm -rf "$auth"' EXIT
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { podman logs "$cid" >&2; exit 1; }
curl -fsS -X POST -H "Authorization: Bearer $(cat "$auth/token")" -H 'Content-Type: application/json' \
  "http://127.0.0.1:$port/v1/allow" -d '{"client":"image-check"}' | grep -q '"allowed":true'
echo "the image serves: ready, and decided a request on 127.0.0.1:$port"
