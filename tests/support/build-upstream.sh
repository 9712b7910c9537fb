#!/usr/bin/env bash
# Builds the upstream components that the real-cluster tests run
# (tests/real_cluster) from the Go modules pinned in tests/upstream/:
# kube-apiserver, kube-controller-manager, kube-scheduler and kwok from
# tests/upstream/go.mod, etcd from tests/upstream/cmd/etcd/go.mod; and the
# oracle (tests/upstream/cmd/oracle), which answers the differential test
# tests/oracle.rs with kube-scheduler's own plugins, DRA allocator and CEL.
#
# The binaries are built once per pinned version into a cache outside the
# checkout, keyed by a hash of the modules' files, the Go version and the
# build flags:
#   ${MUSTER_UPSTREAM_CACHE:-$HOME/.cache/muster/upstream}/<key>/
# and linked into .tools/upstream/. A fresh clone on a machine that built
# them before only links them (a second); when .tools/upstream/ already
# points at the current key this is a no-op. Go's own module and build
# caches (GOMODCACHE, GOCACHE) are used as they are set.
#
# Needs Go at least as new as the modules' `go` lines; fails, naming what to
# install, when it is missing or older. A component whose modules cannot be
# had is reported with what the module proxy answered; the others are still
# built, and the script exits non-zero.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
src="$root/tests/upstream"
out="$root/.tools/upstream"
cache_root="${MUSTER_UPSTREAM_CACHE:-${HOME:-/root}/.cache/muster/upstream}"

# binary name | module directory (relative to tests/upstream) | package
components=(
  "kube-apiserver|.|k8s.io/kubernetes/cmd/kube-apiserver"
  "kube-controller-manager|.|k8s.io/kubernetes/cmd/kube-controller-manager"
  "kube-scheduler|.|k8s.io/kubernetes/cmd/kube-scheduler"
  "kwok|.|sigs.k8s.io/kwok/cmd/kwok"
  "etcd|cmd/etcd|muster.dev/tests/upstream/cmd/etcd"
  "oracle|.|muster.dev/tests/upstream/cmd/oracle"
)
module_dirs=(. cmd/etcd)

say() { printf 'build-upstream: %s\n' "$*" >&2; }

# The newest `go` line of the modules: the oldest Go that can build them.
need=$(for d in "${module_dirs[@]}"; do awk '$1 == "go" { print $2; exit }' "$src/$d/go.mod"; done |
  sort -V | tail -n 1)

if ! command -v go >/dev/null 2>&1; then
  say "'go' is not on PATH: install Go $need or newer (the Go toolchain, with its 'go' command on PATH) to build the pinned Kubernetes components"
  exit 1
fi
# Build with the Go that is installed, never a toolchain fetched on the fly:
# an older one is reported below instead.
export GOTOOLCHAIN=local
have=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
  say "Go $have is too old for tests/upstream (its go.mod files need go $need): install Go $need or newer"
  exit 1
fi

# Versions of the pinned modules (from go.mod; go.sum pins their content).
# A require line in a block or on its own ("require mod v1.2.3").
modver() {
  awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$src/$1/go.mod"
}
kube_version=$(modver . k8s.io/kubernetes)
kwok_version=$(modver . sigs.k8s.io/kwok)
etcd_version=$(modver cmd/etcd go.etcd.io/etcd/server/v3)
if [ -z "$kube_version" ] || [ -z "$kwok_version" ] || [ -z "$etcd_version" ]; then
  say "tests/upstream/go.mod or cmd/etcd/go.mod does not pin k8s.io/kubernetes, sigs.k8s.io/kwok and go.etcd.io/etcd/server/v3"
  exit 1
fi
kube_minor=$(echo "$kube_version" | cut -d. -f2)

# kube's version variables are set by its release build from git; set them to
# the pinned release so /version and the components' --version report it.
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor"
  kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
# kwok reports its version, and the Kubernetes version it fakes, without the "v".
kwok_ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${kube_version#v}"
etcd_ldflags="-s -w"

key=$(
  {
    for d in "${module_dirs[@]}"; do
      for f in go.mod go.sum; do echo "== $d/$f"; cat "$src/$d/$f"; done
    done
    for f in tools.go cmd/etcd/main.go cmd/oracle/main.go; do echo "== $f"; cat "$src/$f"; done
    echo "== $(go env GOVERSION GOOS GOARCH | tr '\n' ' ')"
    echo "== $kube_ldflags | $kwok_ldflags | $etcd_ldflags | -trimpath"
  } | sha256sum | cut -c1-16
)
dir="$cache_root/$key"

all_present() {
  local c
  for c in "${components[@]}"; do [ -x "$1/${c%%|*}" ] || return 1; done
  [ -f "$1/kwok.yaml" ]
}

link() {
  mkdir -p "$out"
  local c name
  for c in "${components[@]}"; do
    name=${c%%|*}
    ln -sfn "$dir/$name" "$out/$name"
  done
  ln -sfn "$dir/kwok.yaml" "$out/kwok.yaml"
  cp "$dir/VERSIONS" "$out/VERSIONS"
  echo "$key" > "$out/.key"
}

# Already linked to this key, and the cache is still there: nothing to do.
if [ "$(cat "$out/.key" 2>/dev/null)" = "$key" ] && all_present "$out"; then
  exit 0
fi

mkdir -p "$cache_root"
# One build per key at a time: a second caller waits, then finds it built.
exec 9>"$cache_root/$key.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

if [ -f "$dir/.complete" ] && all_present "$dir"; then
  link
  say "linked $dir into .tools/upstream"
  exit 0
fi

say "building Kubernetes $kube_version (kube-apiserver, kube-controller-manager, kube-scheduler), kwok $kwok_version and etcd $etcd_version into $dir"
say "(a first build takes a long while; later ones, and other clones, reuse it)"
tmp="$cache_root/$key.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

failed=()
for c in "${components[@]}"; do
  IFS='|' read -r name mdir pkg <<<"$c"
  case "$name" in
    kwok) ldflags=$kwok_ldflags ;;
    etcd) ldflags=$etcd_ldflags ;;
    *) ldflags=$kube_ldflags ;;
  esac
  start=$(date +%s)
  log="$tmp/$name.build.log"
  if (cd "$src/$mdir" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="$ldflags" -o "$tmp/$name" "$pkg") >"$log" 2>&1; then
    say "built $name in $(($(date +%s) - start)) s"
  else
    say "could not build $name ($pkg in tests/upstream/$mdir); go said:"
    sed 's/^/    /' "$log" >&2
    # A module the proxy would not serve: name it and the proxy's answer.
    grep -E '^go: [^ ]+@[^ ]+: (reading|verifying|missing)|server response' "$log" |
      sed 's/^/    unavailable module: /' >&2 || true
    failed+=("$name")
  fi
done

# The kwok controller has no stages of its own (kwokctl writes them into
# its configuration): take the default ones kwokctl uses, from the pinned
# kwok module, into one configuration file for `kwok --config`. Node:
# initialize, then heartbeat with a lease; pod: ready, complete, delete.
if kwok_dir=$(cd "$src" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok 2>"$tmp/kwok-stages.log") && [ -n "$kwok_dir" ]; then
  stages="$kwok_dir/kustomize/stage"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$stages/$f"
  done >"$tmp/kwok.yaml" || { say "kwok's stages are missing from $stages"; failed+=("kwok.yaml"); }
else
  say "could not find the kwok module's directory; go said:"
  sed 's/^/    /' "$tmp/kwok-stages.log" >&2
  failed+=("kwok.yaml")
fi

cat >"$tmp/VERSIONS" <<EOF
kubernetes $kube_version
kwok $kwok_version
etcd $etcd_version
$(go env GOVERSION) $(go env GOOS)/$(go env GOARCH)
EOF

if [ ${#failed[@]} -gt 0 ]; then
  # Keep what was built where the tests look for it, but do not mark the
  # cache entry complete: the next run tries the missing ones again.
  mkdir -p "$out"
  for c in "${components[@]}"; do
    name=${c%%|*}
    if [ -x "$tmp/$name" ]; then cp "$tmp/$name" "$out/$name"; fi
  done
  if [ -f "$tmp/kwok.yaml" ]; then cp "$tmp/kwok.yaml" "$out/kwok.yaml"; fi
  rm -f "$out/.key"
  say "not built: ${failed[*]} (see above); the others are in .tools/upstream"
  exit 1
fi

touch "$tmp/.complete"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
rm -f "$dir"/*.build.log "$dir/kwok-stages.log"
link
say "built into $dir and linked into .tools/upstream"
