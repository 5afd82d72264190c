#!/usr/bin/env bash
# Build the local control plane (kube-apiserver, kube-controller-manager, kubectl, etcd) and
# Pebble from Go modules, once per machine and version; print the folder holding them.
#
# Each binary is built from a module of ours under tools/ (go.mod + go.sum lock every
# dependency); the Go module proxy serves them all. Built binaries are cached outside the
# checkout, keyed by version, so a second run returns at once.
#
#   scripts/build-control-plane.sh                      # Kubernetes 1.37.2 (the default)
#   AITENANT_KUBE_VERSION=1.32.9 scripts/...            # the oldest version we support
#   KUBEBUILDER_ASSETS=/dir scripts/...                 # use the binaries there, build nothing
#   AITENANT_CACHE=/some/dir scripts/...                # cache elsewhere (~/.cache/aitenant-k8s)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

KUBE_VERSION="${AITENANT_KUBE_VERSION:-1.37.2}"
# The version a module of ours requires: go.mod's "require PATH VERSION" or "\tPATH VERSION".
required() { awk -v m="$2" '{ if ($1 == "require") $1 = ""; $0 = $0 } $1 == m { print $2 }' "$1"; }
ETCD_VERSION="$(required tools/etcd/go.mod go.etcd.io/etcd/server/v3)"
PEBBLE_VERSION="$(required tools/pebble/go.mod github.com/canonical/pebble)"
[ -n "$ETCD_VERSION" ] && [ -n "$PEBBLE_VERSION" ] || {
  echo "build-control-plane: cannot read the etcd or Pebble version from tools/*/go.mod" >&2; exit 1; }
CACHE="${AITENANT_CACHE:-$HOME/.cache/aitenant-k8s}"
command -v go >/dev/null || { echo "build-control-plane: needs Go on PATH" >&2; exit 1; }
KUBE_BINARIES=(kube-apiserver kube-controller-manager kubectl)

log() { echo "build-control-plane: $*" >&2; }
# shellcheck source=scripts/kube-build.sh
source scripts/kube-build.sh

# Pebble is not a control-plane binary: it comes from our cache even with KUBEBUILDER_ASSETS.
pebble_bin="$CACHE/pebble-$PEBBLE_VERSION/bin"

build_pebble() {
  [ -x "$pebble_bin/pebble" ] && return 0
  log "building pebble $PEBBLE_VERSION"
  (cd tools/pebble && CGO_ENABLED=0 go build -mod=readonly -trimpath \
    -o "$pebble_bin/pebble.tmp" github.com/canonical/pebble/cmd/pebble)
  mv "$pebble_bin/pebble.tmp" "$pebble_bin/pebble"
}

have_all() {
  local dir="$1" b
  for b in "${KUBE_BINARIES[@]}" etcd; do [ -x "$dir/$b" ] || return 1; done
}

# The CRDs of Gateway API and Kuadrant that the tests install (devtools/crds.py): into the
# module cache now, so no test waits on a download.
(cd tools/crds && go mod download)

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  have_all "$KUBEBUILDER_ASSETS" || {
    log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks one of ${KUBE_BINARIES[*]} etcd"; exit 1; }
  build_pebble
  ln -sf "$pebble_bin/pebble" "$KUBEBUILDER_ASSETS/pebble" 2>/dev/null || true
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

module="$ROOT/tools/kubernetes/v$KUBE_VERSION"
[ -f "$module/go.mod" ] || {
  log "no module for Kubernetes $KUBE_VERSION (tools/kubernetes/ has: $(ls tools/kubernetes | tr '\n' ' '))"
  exit 1; }
BIN="$CACHE/kubernetes-v$KUBE_VERSION-etcd-$ETCD_VERSION/bin"

if have_all "$BIN" && [ -x "$BIN/pebble" ]; then echo "$BIN"; exit 0; fi
mkdir -p "$BIN"

have_all "$BIN" || log "building ${KUBE_BINARIES[*]} v$KUBE_VERSION as needed (kube-apiserver takes about 5 minutes on 2 cores, cold)"
build_kube_binaries "$module" "$KUBE_VERSION" "$BIN" "${KUBE_BINARIES[@]}"

if [ ! -x "$BIN/etcd" ]; then
  log "building etcd $ETCD_VERSION"
  (cd tools/etcd && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" .)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
fi

build_pebble
ln -sf "$pebble_bin/pebble" "$BIN/pebble"
log "binaries cached in $BIN"
echo "$BIN"
