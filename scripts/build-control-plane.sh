#!/usr/bin/env bash
# Build the local control plane used by the e2e tests and the demo, once per machine.
#
# No package registry ships a kube-apiserver binary, but Debian bookworm's `kubernetes` source
# package (1.20.2, with vendor/) builds offline with Debian's Go. The binaries are cached outside
# the checkout; a second run finds them and returns at once.
#
#   scripts/build-control-plane.sh            # prints the directory holding the binaries
#   AITENANT_CACHE=/some/dir scripts/...      # cache elsewhere (default ~/.cache/aitenant-k8s)
set -euo pipefail

CACHE="${AITENANT_CACHE:-$HOME/.cache/aitenant-k8s}"
# Bump the suffix whenever the patches below change, so cached builds are redone.
BIN="$CACHE/kube-v1.20.2-p1/bin"
WANT=(kube-apiserver kube-controller-manager)
command -v kubectl >/dev/null 2>&1 || WANT+=(kubectl)

log() { echo "build-control-plane: $*" >&2; }

have_all() {
  local b
  for b in "${WANT[@]}"; do [ -x "$BIN/$b" ] || return 1; done
  # etcd comes from apt, not from the cache.
  command -v etcd >/dev/null 2>&1 || [ -x /usr/bin/etcd ]
}

if have_all; then echo "$BIN"; exit 0; fi

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

# deb-src lines for the suites already configured (deb822 or one-line format).
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  log "adding deb-src entries"
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    $SUDO sed -i 's/^Types: deb$/Types: deb deb-src/' /etc/apt/sources.list.d/debian.sources
  else
    grep -E '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' | $SUDO tee /etc/apt/sources.list.d/aitenant-src.list >/dev/null
  fi
fi
log "installing build dependencies with apt"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  golang-go etcd-server golang-github-modern-go-reflect2-dev rsync make dpkg-dev >/dev/null

if have_all; then echo "$BIN"; exit 0; fi

WORK="$CACHE/build"
rm -rf "$WORK"; mkdir -p "$WORK"
cd "$WORK"
log "fetching Debian's kubernetes source package"
apt-get source -qq --download-only kubernetes >/dev/null
dpkg-source -x --skip-patches ./kubernetes_*.dsc src >/dev/null 2>&1 || dpkg-source -x ./kubernetes_*.dsc src >/dev/null

# vendored reflect2 v1.0.1 segfaults under Go >= 1.18; use Debian's 1.0.2.
rm -rf src/vendor/github.com/modern-go/reflect2
cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 src/vendor/github.com/modern-go/reflect2

# kube-openapi in 1.20 treats the zero value of a typed field ("" or 0) as null when built with
# Go >= 1.18 (kubernetes#99804, fixed upstream in kube-openapi#230): `""` in a custom
# resource's string field is refused. Apply the upstream fix: only a real nil is null.
openapi_type=src/vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go
sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$openapi_type"
grep -q 'reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data))' "$openapi_type" && {
  log "could not patch $openapi_type"; exit 1; }
# reflect may now be unused in that file.
grep -q 'reflect\.' "$openapi_type" || sed -i '/^\s*"reflect"$/d' "$openapi_type"

mkdir -p gopath/src/k8s.io
ln -s "$WORK/src" gopath/src/k8s.io/kubernetes
cd gopath/src/k8s.io/kubernetes
targets="cmd/kube-apiserver cmd/kube-controller-manager"
[[ " ${WANT[*]} " == *" kubectl "* ]] && targets="$targets cmd/kubectl"
log "building $targets (a few minutes on 2 cores)"
GOPATH="$WORK/gopath" GO111MODULE=off GOFLAGS="" KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean \
  make WHAT="$targets" >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log" >&2; exit 1; }

mkdir -p "$BIN"
for b in "${WANT[@]}"; do
  cp "_output/local/go/bin/$b" "$BIN/$b" 2>/dev/null || cp "_output/bin/$b" "$BIN/$b"
done
cd "$CACHE"; rm -rf "$WORK"
log "binaries cached in $BIN"
echo "$BIN"
