#!/usr/bin/env bash
# Build KWOK's controller (sigs.k8s.io/kwok/cmd/kwok) from our module tools/kwok, once per
# machine and version; print the folder holding it.
#
# KWOK plays the kubelet for fake Nodes so the scale benchmarks can schedule a thousand
# maas-api pods through the real scheduler and deployment controller (docs/design.md,
# "Scale with simulated nodes"). Only the benchmarks use it; the e2e suite stays on the real
# node. The binary is cached outside the checkout, keyed by version.
#
#   scripts/build-kwok.sh                      # the version tools/kwok/go.mod requires
#   AITENANT_CACHE=/some/dir scripts/...       # cache elsewhere (~/.cache/aitenant-k8s)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "build-kwok: $*" >&2; }
command -v go >/dev/null || { log "needs Go on PATH"; exit 1; }
KWOK_VERSION="$(awk '$1 == "require" && $2 == "sigs.k8s.io/kwok" { print $3 }' tools/kwok/go.mod)"
[ -n "$KWOK_VERSION" ] || { log "cannot read the KWOK version from tools/kwok/go.mod"; exit 1; }
CACHE="${AITENANT_CACHE:-$HOME/.cache/aitenant-k8s}"
BIN="$CACHE/kwok-$KWOK_VERSION/bin"

if [ ! -x "$BIN/kwok" ]; then
  mkdir -p "$BIN"
  log "building kwok $KWOK_VERSION (about 4 minutes on 2 cores, cold)"
  (cd tools/kwok && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" \
    -o "$BIN/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok)
  mv "$BIN/kwok.tmp" "$BIN/kwok"
fi
echo "$BIN"
