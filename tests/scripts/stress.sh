#!/usr/bin/env bash
# The whole test suite N times in a row on a busy machine: two busy loops and a parallel
# `cargo build` (its own target directory, rebuilt in a loop) run for as long as the runs do.
#
#   tests/scripts/stress.sh            # 5 runs of the whole suite
#   tests/scripts/stress.sh 20 -E 'test(/^trust::/) | test(/^faults::/)'   # 20 runs of two files' tests
#
# Arguments after N go to `cargo nextest run`. Prints one line per run and a last line
# "stress: R runs, F failed"; exits 1 if any run failed. Each run's log is kept in
# target/stress/run-K.log. Needs what tests/scripts/test.sh installs (run it once first).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-5}"
shift || true
features=fault-injection,otf2
logs=target/stress
mkdir -p "$logs"

cargo nextest run --workspace --features "$features" --no-run >/dev/null

loads=()
cleanup() {
    for p in "${loads[@]}"; do
        kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true
    done
}
trap cleanup EXIT INT TERM
for _ in 1 2; do
    setsid bash -c 'while :; do :; done' &
    loads+=("$!")
done
# A parallel build: the release binary in a target directory of its own, cleaned and built again.
setsid bash -c 'while :; do
    cargo build --release --quiet --target-dir target/stress-build >/dev/null 2>&1
    cargo clean --quiet -p rocprof-attach --release --target-dir target/stress-build >/dev/null 2>&1
done' &
loads+=("$!")

failed=0
for k in $(seq 1 "$runs"); do
    start=$(date +%s)
    if cargo nextest run --workspace --features "$features" --no-fail-fast "$@" >"$logs/run-$k.log" 2>&1; then
        result=passed
    else
        result=FAILED
        failed=$((failed + 1))
    fi
    summary=$(grep -E '^ *Summary' "$logs/run-$k.log" | tail -1 | sed 's/^ *//')
    echo "stress: run $k/$runs $result in $(( $(date +%s) - start )) s: $summary (load avg $(cut -d' ' -f1 /proc/loadavg))"
    [ "$result" = passed ] || grep -E '^ *(FAIL|TIMEOUT) ' "$logs/run-$k.log" | sort -u | sed 's/^/stress:   /' || true
done
echo "stress: $runs runs, $failed failed"
[ "$failed" = 0 ]
