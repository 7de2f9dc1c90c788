#!/usr/bin/env bash
# Long reliability runs (issue 5); see docs/reliability.md.
#
#   tests/scripts/soak.sh                 # 10,000 random fault trials + 10,000 attach/detach cycles
#   SOAK_FAULT_TRIALS=2000 SOAK_CYCLES=0 tests/scripts/soak.sh
#   FAULTS_SEED=123 tests/scripts/soak.sh # replay the random trials of a failed run (seed is printed)
#
# SOAK_FAULT_TRIALS: random fault-injection trials in total, split over 4 shards that run in
#   parallel (tests/faults.rs random_shard_*); 0 skips them.
# SOAK_CYCLES: attach/detach cycles of the binary on one target (tests/soak.rs); 0 skips them.
# Every wait in the tests is bounded, so a hang fails the run instead of stalling it.
set -euo pipefail
cd "$(dirname "$0")/../.."

trials=${SOAK_FAULT_TRIALS:-10000}
cycles=${SOAK_CYCLES:-10000}
start=$(date +%s)

if [ "$trials" -gt 0 ]; then
  per_shard=$(( (trials + 3) / 4 ))
  echo "soak: $((per_shard * 4)) random fault trials ($per_shard per shard)"
  FAULTS_TRIALS=$per_shard cargo nextest run --features fault-injection \
    --success-output final --no-fail-fast --test-threads 4 -E 'test(/^faults::random_shard/)'
fi
if [ "$cycles" -gt 0 ]; then
  echo "soak: $cycles attach/detach cycles"
  SOAK_CYCLES=$cycles cargo nextest run --features fault-injection --success-output final \
    -E 'test(/^soak::/)'
fi
echo "soak: passed in $(( $(date +%s) - start )) s"
