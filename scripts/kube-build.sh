# Sourced by build-control-plane.sh and build-node.sh (each defines `log`): build commands of
# k8s.io/kubernetes from our module tools/kubernetes/v<version>, stamped with that version.
#
#   build_kube_binaries <module dir> <version> <bin dir> <command>...
#
# Without the stamps the server reports v0.0.0-master, kubectl cannot parse its version, and
# the API server refuses a kubelet it takes for newer than itself. A command already in
# <bin dir> is kept.
build_kube_binaries() {
  local module="$1" version="$2" bin="$3"
  shift 3
  local minor="${version#*.}"
  minor="${minor%%.*}"
  local ldflags="-s -w" pkg b
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean"
  done
  for b in "$@"; do
    [ -x "$bin/$b" ] && continue
    log "building $b v$version"
    (cd "$module" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" \
      -o "$bin/$b.tmp" "k8s.io/kubernetes/cmd/$b")
    mv "$bin/$b.tmp" "$bin/$b"
  done
}
