#!/usr/bin/env bash
# `make chaos`: runs the chaos suite (tests/chaos.rs) again and again for
# CHAOS_SECONDS and writes target/chaos-report.md: runs, seeds, passes,
# failures, pods, gangs, faults and audits. Exits non-zero if any run failed;
# a failing run's output is kept in target/chaos-failures/ and its seed
# listed, so `CHAOS_SEED=<seed> cargo test --test muster chaos::` replays it.
#
#   chaos-soak.sh [seconds] [seeds...]
#
# The given seeds run first, in order; then random seeds until the time is
# up. CHAOS_STALL_SECONDS (default 35, past the 30 s assumed-pod expiry
# Muster no longer has) is how long each run stalls the scheduler's pod watch.
set -uo pipefail
seconds=${1:-600}
shift || true
seeds=("$@")
export CHAOS_STALL_SECONDS=${CHAOS_STALL_SECONDS:-35}
cd "$(dirname "$0")/../.."
cargo test --test muster --no-run -q >/dev/null 2>&1 || { echo "chaos: build failed" >&2; exit 1; }
report=target/chaos-report.md
mkdir -p target/chaos-failures
start=$(date +%s)
runs=0; passed=0; failed=0; pods=0; gangs=0; dra=0; i2=0; i1=0; i9=0
ran_seeds=(); failed_seeds=()
while [ $(( $(date +%s) - start )) -lt "$seconds" ]; do
  if [ "$runs" -lt "${#seeds[@]}" ]; then
    seed=${seeds[$runs]}
  else
    seed=$(( (RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM ))
  fi
  runs=$((runs + 1))
  ran_seeds+=("$seed")
  out=$(CHAOS_SEED=$seed cargo test --test muster -q -- --nocapture chaos:: 2>&1)
  if [ $? -eq 0 ]; then
    passed=$((passed + 1))
    line=$(printf '%s\n' "$out" | grep 'chaos: summary' | tail -1)
    get() { printf '%s\n' "$line" | sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
    pods=$((pods + $(get pods))); gangs=$((gangs + $(get gangs)))
    dra=$((dra + $(get dra_pods)))
    i2=$((i2 + $(get i2_audits))); i1=$((i1 + $(get i1_audits)))
    i9=$((i9 + $(get i9_audits)))
  else
    failed=$((failed + 1))
    failed_seeds+=("$seed")
    printf '%s\n' "$out" > "target/chaos-failures/seed-$seed.log"
  fi
  echo "chaos: run $runs (seed $seed): $passed passed, $failed failed"
done
elapsed=$(( $(date +%s) - start ))
cat > "$report" <<REPORT
# Chaos soak

- duration: ${elapsed} s (CHAOS_SECONDS=${seconds}), $(nproc) cores
- runs: ${runs}; passed: ${passed}; failed: ${failed}
- seeds: ${ran_seeds[*]:-none}
- failing seeds: ${failed_seeds[*]:-none} (logs in target/chaos-failures/)
- per run, fault steps in a seed-drawn order with seed-drawn batch sizes:
  calm; 20% and 50% of the scheduler's writes failing (50 ms latency at
  50%); watches closed every second; every watch resume of the scheduler
  told 410 Gone; 50% of the scheduler's ResourceClaim status writes
  failing; then, in a seed-drawn order, the scheduler's pod watch stalled
  for ${CHAOS_STALL_SECONDS} s while its bindings complete and pods that do
  not fit retry; a node deleted under reserved gang members and restored; a
  waiting gang's minCount lowered and a waiting gang's PodGroup deleted and
  recreated; claims deleted under gang members waiting at Permit and under a
  pod whose binding is in flight; a node's ResourceSlice withdrawn under
  allocated devices and republished; then another scheduler's pods holding
  capacity; one kill -9 while bindings are in flight; one leader frozen past
  its lease while a standby takes over, then thawed. Devices (2 GPUs per
  node) are contended in every batch but the stall step's: a gang, plain
  pods and two pods sharing one named claim ask for them
- pods created: ${pods}; gangs: ${gangs}; pods with a device claim: ${dra}
- audits: I2 (no overcommit) ${i2}, on every pod event; I1 (no partial gang)
  ${i1}, when a step settles; I9 (no device in two claims; every bound pod's
  claims allocated, reserved for it, reaching its node) ${i9}, on every
  ResourceClaim event and when a step settles; I4 (every pod bound once
  capacity exists) at every step; no pod bound to a deleted node;
  violations: ${failed}
REPORT
cat "$report"
[ "$failed" -eq 0 ]
