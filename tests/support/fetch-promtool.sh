#!/usr/bin/env bash
# Fetches promtool into .tools/ (git-ignored) for `make alerts`: it is
# extracted from Debian's prometheus package (downloaded, not installed: no
# service, no users). The package version and the sha256 of the package and
# of promtool are pinned; another digest is refused. Idempotent.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
tools="$root/.tools"
version="2.42.0+ds-5+deb12u1"
deb_sha256="81d59a24fce84f7fbe97a45a4f2914b6a5881b5cd1db2a6a0e129e515e1a5f55"
promtool_sha256="14d9c8acdc5d1321dc2092400111c586f09ac350f23f2383d1679b2bf256e583"

digest_ok() {
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

if digest_ok "$tools/promtool" "$promtool_sha256"; then
  exit 0
fi
command -v apt-get >/dev/null || { echo "fetch-promtool: apt-get is needed (Debian's prometheus package)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch-promtool: downloading prometheus $version from Debian" >&2
if ! (cd "$work" && apt-get download -q "prometheus=$version" >/dev/null 2>&1); then
  # A fresh machine has no package lists yet.
  apt-get update -qq >&2
  (cd "$work" && apt-get download -q "prometheus=$version" >&2)
fi
deb=$(ls "$work"/prometheus_*.deb)
if ! digest_ok "$deb" "$deb_sha256"; then
  echo "fetch-promtool: $(basename "$deb") has sha256 $(sha256sum "$deb" | cut -d' ' -f1), want $deb_sha256; not installed" >&2
  exit 1
fi
dpkg-deb -x "$deb" "$work/x"
if ! digest_ok "$work/x/usr/bin/promtool" "$promtool_sha256"; then
  echo "fetch-promtool: promtool has sha256 $(sha256sum "$work/x/usr/bin/promtool" | cut -d' ' -f1), want $promtool_sha256; not installed" >&2
  exit 1
fi
mkdir -p "$tools"
install -m 0755 "$work/x/usr/bin/promtool" "$tools/promtool"
"$tools/promtool" --version | head -1 >&2
