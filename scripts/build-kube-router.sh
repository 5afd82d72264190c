#!/usr/bin/env bash
# Build kube-router (its network-policy firewall is what enforces NetworkPolicies on the e2e
# node: devtools/netpol.py, docs/platform.md §9) from our module tools/kube-router, once per
# machine and version; print the folder holding it.
#
#   scripts/build-kube-router.sh                 # the version tools/kube-router/go.mod locks
#   AITENANT_CACHE=/some/dir scripts/...         # cache elsewhere (~/.cache/aitenant-k8s)
set -euo pipefail
cd "$(dirname "$0")/.."

MODULE=github.com/cloudnativelabs/kube-router/v2
required() { awk -v m="$2" '{ if ($1 == "require") $1 = ""; $0 = $0 } $1 == m { print $2 }' "$1"; }
VERSION="$(required tools/kube-router/go.mod "$MODULE")"
[ -n "$VERSION" ] || { echo "build-kube-router: cannot read kube-router's version from tools/kube-router/go.mod" >&2; exit 1; }
CACHE="${AITENANT_CACHE:-$HOME/.cache/aitenant-k8s}"
BIN="$CACHE/kube-router-$VERSION/bin"
command -v go >/dev/null || { echo "build-kube-router: needs Go on PATH" >&2; exit 1; }

if [ ! -x "$BIN/kube-router" ]; then
  echo "build-kube-router: building kube-router $VERSION (about 2 minutes on 2 cores, cold)" >&2
  mkdir -p "$BIN"
  # The version stamp is what `kube-router --version` and its start-up log report.
  (cd tools/kube-router && CGO_ENABLED=0 go build -mod=readonly -trimpath \
    -ldflags "-s -w -X $MODULE/pkg/version.Version=$VERSION" \
    -o "$BIN/kube-router.tmp" "$MODULE/cmd/kube-router")
  mv "$BIN/kube-router.tmp" "$BIN/kube-router"
fi
echo "$BIN"
