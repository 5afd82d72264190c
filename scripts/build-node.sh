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
command -v go >/dev/null || { log "needs Go on PATH"; exit 1; }

module="$PWD/tools/kubernetes/v$KUBE_VERSION"
[ -f "$module/go.mod" ] || { log "no module for Kubernetes $KUBE_VERSION under tools/kubernetes/"; exit 1; }
BIN="$CACHE/kubernetes-node-v$KUBE_VERSION/bin"
mkdir -p "$BIN"

# The same version stamps as scripts/build-control-plane.sh: the kubelet reports its version
# to the API server, which refuses a node newer than itself.
minor="${KUBE_VERSION#*.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean"
done

for b in "${NODE_BINARIES[@]}"; do
  [ -x "$BIN/$b" ] && continue
  log "building $b v$KUBE_VERSION (all three: about 70 s on 2 cores after the control plane)"
  (cd "$module" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" \
    -o "$BIN/$b.tmp" "k8s.io/kubernetes/cmd/$b")
  mv "$BIN/$b.tmp" "$BIN/$b"
done
echo "$BIN"
