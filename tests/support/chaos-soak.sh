#!/usr/bin/env bash
# `make chaos`: runs the chaos suite (tests/chaos.rs) again and again for
# CHAOS_SECONDS and writes target/chaos-report.md: runs, passes, failures,
# pods, gangs, faults and audits. Exits non-zero if any run failed; the
# failing run's output is kept in target/chaos-failures/.
set -uo pipefail
seconds=${1:-600}
cd "$(dirname "$0")/../.."
cargo test --test chaos --no-run -q >/dev/null 2>&1 || { echo "chaos: build failed" >&2; exit 1; }
report=target/chaos-report.md
mkdir -p target/chaos-failures
start=$(date +%s)
runs=0; passed=0; failed=0; pods=0; gangs=0; i2=0; i1=0
while [ $(( $(date +%s) - start )) -lt "$seconds" ]; do
  runs=$((runs + 1))
  out=$(cargo test --test chaos -q -- --nocapture 2>&1)
  if [ $? -eq 0 ]; then
    passed=$((passed + 1))
    line=$(printf '%s\n' "$out" | grep 'chaos: summary' | tail -1)
    get() { printf '%s\n' "$line" | sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
    pods=$((pods + $(get pods))); gangs=$((gangs + $(get gangs)))
    i2=$((i2 + $(get i2_audits))); i1=$((i1 + $(get i1_audits)))
  else
    failed=$((failed + 1))
    printf '%s\n' "$out" > "target/chaos-failures/run-$runs.log"
  fi
  echo "chaos: run $runs: $passed passed, $failed failed"
done
elapsed=$(( $(date +%s) - start ))
cat > "$report" <<REPORT
# Chaos soak

- duration: ${elapsed} s (CHAOS_SECONDS=${seconds}), $(nproc) cores
- runs: ${runs}; passed: ${passed}; failed: ${failed}
- per run: 5 fault steps (calm; 20% and 50% of the scheduler's writes failing,
  with 50 ms latency; watches closed every second; another scheduler's pods
  holding capacity), one kill -9 while bindings are in flight, one leader
  frozen past its lease while a standby takes over, then thawed
- pods created: ${pods}; gangs: ${gangs}
- audits: I2 (no overcommit) ${i2}, on every pod event; I1 (no partial gang)
  ${i1}, when a step settles; I4 (every pod bound once capacity exists) at
  every step; violations: ${failed}
REPORT
cat "$report"
[ "$failed" -eq 0 ]
