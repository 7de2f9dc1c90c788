#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test (unit, integration,
# fault injection). Works on a fresh Debian 12 machine with a Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v gcc >/dev/null || need_apt+=(gcc libc6-dev)
command -v setcap >/dev/null || need_apt+=(libcap2-bin)
command -v setpriv >/dev/null || need_apt+=(util-linux)
command -v unshare >/dev/null || need_apt+=(util-linux)
if [ -x scripts/ci-deps.sh ]; then
  # shellcheck disable=SC1091
  mapfile -t extra < <(scripts/ci-deps.sh --list)
  for p in "${extra[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || need_apt+=("$p"); done
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing: ${need_apt[*]}"
  if [ "$(id -u)" -eq 0 ]; then APT=(apt-get); else APT=(sudo apt-get); fi
  "${APT[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -y -qq "${need_apt[@]}" >/dev/null
fi
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install --locked cargo-nextest
fi

cargo build --release --bin rocprof-attach
cargo nextest run --features fault-injection --no-fail-fast "$@"
