#!/usr/bin/env bash
# Fuzz smoke run (part of the test command): builds the cargo-fuzz targets in tests/fuzz once,
# then runs each for SECONDS (default 60) from its committed corpus and regression inputs, one
# after the other. Fails on the first crash, hang (-timeout) or memory blow-up (-rss_limit_mb,
# -malloc_limit_mb); the input is left in tests/fuzz/artifacts/<target>/. New corpus entries go
# to a temporary directory, so the committed corpora stay as they are. Installs the nightly
# toolchain and cargo-fuzz when they are missing. docs/reliability.md has the long runs.
#
# The run is seeded (FUZZ_SEED, default 1), so CI replays the same input sequence every time: a
# CI failure is a real bug, not luck, and the long runs of docs/reliability.md start from the
# same seed, so what CI tries is a prefix of what they tried. FUZZ_SEED=0 picks a random seed.
#
#   tests/scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-60}
shift || true
if ! cargo +nightly --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz
fi

fuzz=(cargo +nightly fuzz)
opts=(--fuzz-dir tests/fuzz -O -a)
"${fuzz[@]}" build "${opts[@]}"
if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <("${fuzz[@]}" list --fuzz-dir tests/fuzz)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  inputs=("tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regressions/$t" ] && inputs+=("tests/fuzz/regressions/$t")
  echo "fuzz: $t for ${seconds}s"
  if ! "${fuzz[@]}" run "${opts[@]}" "$t" "$work/$t" "${inputs[@]}" -- \
      -seed="${FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -print_final_stats=1 >"$work/$t.log" 2>&1; then
    tail -n 60 "$work/$t.log" >&2
    echo "fuzz: $t FAILED; the input is in tests/fuzz/artifacts/$t/ (replay: cargo +nightly fuzz run --fuzz-dir tests/fuzz -O -a $t FILE)" >&2
    exit 1
  fi
  grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)" "$work/$t.log" |
    sed "s/^/fuzz: $t /"
done
