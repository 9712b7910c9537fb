#!/usr/bin/env bash
# `make fuzz-keep`: minimizes each target's grown corpus (tests/fuzz/corpus,
# what `make fuzz` left) with `cargo fuzz cmin` and packs the result into
# tests/fuzz/regressions/<target>.bin — 4-byte little-endian length, then the
# input, repeated — which tests/fuzz_regressions.rs replays in `make test`.
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=${FUZZ_TARGETS:-quantity selector pod group_definition config}
sanitizer=${FUZZ_SANITIZER:-address}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
le32() { local n=$1; printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $(((n >> 8) & 255)))\\x$(printf %02x $(((n >> 16) & 255)))\\x$(printf %02x $(((n >> 24) & 255)))"; }
for t in $targets; do
  cp -r "tests/fuzz/corpus/$t" "$work/$t"
  RUSTC_BOOTSTRAP=1 cargo fuzz cmin --fuzz-dir tests/fuzz --target-dir "$PWD/target/fuzz" \
    -s "$sanitizer" "$t" "$work/$t" >"$work/$t.log" 2>&1 || { cat "$work/$t.log"; exit 1; }
  out="tests/fuzz/regressions/$t.bin"
  : >"$out"
  n=0
  for f in $(ls "$work/$t" | sort); do
    le32 "$(stat -c %s "$work/$t/$f")" >>"$out"
    cat "$work/$t/$f" >>"$out"
    n=$((n + 1))
  done
  echo "fuzz-keep: $t: $n inputs, $(stat -c %s "$out") bytes in $out"
done
