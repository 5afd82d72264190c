#!/usr/bin/env bash
# Build the node binaries (kubelet, kube-scheduler, kube-proxy) from the same Go module as the
# control plane (tools/kubernetes/v<version>), once per machine and version; print their folder.
#
# The binaries are cached outside the checkout, beside the control plane's, and come from our
# cache even when KUBEBUILDER_ASSETS names the control plane (that convention has no node).
#
#   scripts/build-node.sh                      # Kubernetes 1.37.2 (the default)
#   AITENANT_KUBE_VERSION=1.32.9 scripts/...   # another version with a module under tools/
#   AITENANT_CACHE=/some/dir scripts/...       # cache elsewhere (~/.cache/aitenant-k8s)
set -euo pipefail
cd "$(dirname "$0")/.."

KUBE_VERSION="${AITENANT_KUBE_VERSION:-1.37.2}"
CACHE="${AITENANT_CACHE:-$HOME/.cache/aitenant-k8s}"
NODE_BINARIES=(kubelet kube-scheduler kube-proxy)
log() { echo "build-node: $*" >&2; }
# shellcheck source=scripts/kube-build.sh
source scripts/kube-build.sh
command -v go >/dev/null || { log "needs Go on PATH"; exit 1; }

module="$PWD/tools/kubernetes/v$KUBE_VERSION"
[ -f "$module/go.mod" ] || { log "no module for Kubernetes $KUBE_VERSION under tools/kubernetes/"; exit 1; }
BIN="$CACHE/kubernetes-node-v$KUBE_VERSION/bin"
mkdir -p "$BIN"

have_all() { local b; for b in "${NODE_BINARIES[@]}"; do [ -x "$BIN/$b" ] || return 1; done; }
have_all || log "building ${NODE_BINARIES[*]} v$KUBE_VERSION (all three: about 70 s on 2 cores after the control plane)"
build_kube_binaries "$module" "$KUBE_VERSION" "$BIN" "${NODE_BINARIES[@]}"
echo "$BIN"
