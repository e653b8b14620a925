#!/usr/bin/env bash
# Builds the container image localhost/quorate:$VERSION (and :latest) with
# podman, installing Debian's podman when missing: a static binary and an
# empty data dir on an empty base (deploy/image/Containerfile), so nothing
# is pulled from a registry. Then runs the image once (`quorate version`)
# to show it starts.
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
podman run --rm localhost/quorate:latest version
