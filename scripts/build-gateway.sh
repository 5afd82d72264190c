#!/usr/bin/env bash
# Build Traefik, the Gateway API implementation the gateway e2e tests run beside the node
# (devtools/gateway.py), from tools/traefik (go.mod + go.sum lock every dependency); print the
# path of the binary. Cached outside the checkout, keyed by version: a second run returns at once.
#
#   scripts/build-gateway.sh                  # Traefik at tools/traefik/go.mod's version
#   AITENANT_CACHE=/some/dir scripts/...      # cache elsewhere (~/.cache/aitenant-k8s)
set -euo pipefail
cd "$(dirname "$0")/.."

required() { awk -v m="$2" '{ if ($1 == "require") $1 = ""; $0 = $0 } $1 == m { print $2 }' "$1"; }
VERSION="$(required tools/traefik/go.mod github.com/traefik/traefik/v3)"
[ -n "$VERSION" ] || { echo "build-gateway: cannot read Traefik's version from tools/traefik/go.mod" >&2; exit 1; }
command -v go >/dev/null || { echo "build-gateway: needs Go on PATH" >&2; exit 1; }
CACHE="${AITENANT_CACHE:-$HOME/.cache/aitenant-k8s}"
BIN="$CACHE/traefik-$VERSION/bin"

if [ ! -x "$BIN/traefik" ]; then
  mkdir -p "$BIN"
  echo "build-gateway: building traefik $VERSION (10 to 30 minutes on 2 cores, cold)" >&2
  (cd tools/traefik && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" \
    -o "$BIN/traefik.tmp" github.com/traefik/traefik/v3/cmd/traefik)
  mv "$BIN/traefik.tmp" "$BIN/traefik"
fi
echo "$BIN/traefik"
