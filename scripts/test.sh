#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test (unit, integration,
# fault injection). Works on a fresh Debian 12 machine with a Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ci-deps.sh
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi

cargo nextest run --features fault-injection --no-fail-fast "$@"
