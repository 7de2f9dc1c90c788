#!/usr/bin/env bash
# Install the Python package from this checkout into a fresh venv: tests/scripts/python-venv.sh DIR
#
# Builds with cargo's dev profile into the checkout's own target/ (SETUPTOOLS_RUST_CARGO_PROFILE,
# CARGO_TARGET_DIR), so CI reuses the dependencies the test suite compiles anyway. A user
# installs with a plain `pip install .` (release build) instead; see docs/library.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${1:?usage: tests/scripts/python-venv.sh DIR}
rm -rf "$venv"
python3 -m venv "$venv"
CARGO_TARGET_DIR="$PWD/target" SETUPTOOLS_RUST_CARGO_PROFILE=dev \
  "$venv/bin/pip" install --quiet --disable-pip-version-check .
"$venv/bin/python" -c 'import rocprof_attach, os; assert os.path.isfile(rocprof_attach.library_path())'
test -x "$venv/bin/rocprof-attach"
echo "python-venv: installed rocprof-attach into $venv"
