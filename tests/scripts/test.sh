#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test (unit, integration,
# fault injection, the pip-installed Python package), then a 30-second fuzz run of each
# cargo-fuzz target (tests/scripts/fuzz.sh; FUZZ_SECONDS=N to change, 0 to skip). Works on a fresh
# Debian 12 machine with a Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/../.."

tests/scripts/ci-deps.sh
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi

# The Python package, pip-installed into a fresh venv (before the suite: the suite's build then
# reuses what pip compiled), then tested by the one test that needs it.
venv="$PWD/target/tmp/python-venv"
tests/scripts/python-venv.sh "$venv"

status=0
# No `otf2` feature: OTF2 is built in because ci-deps.sh installed the library, and
# tests/rocpd_otf2.rs fails if this default build left it out.
cargo nextest run --workspace --features fault-injection --no-fail-fast "$@" || status=$?
ROCPROF_ATTACH_TEST_VENV="$venv" \
  cargo nextest run --features fault-injection --run-ignored only -E 'binary(python)' || status=$?
if [ "${FUZZ_SECONDS:-30}" != 0 ]; then
  tests/scripts/fuzz.sh "${FUZZ_SECONDS:-30}" || status=1
fi
exit "$status"
