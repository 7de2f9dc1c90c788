#!/bin/sh
# Debian packages the test suite needs beyond the Rust toolchain, gcc and make.
# Called from .ci/run (as root); safe to run again.
#
#   openmpi-bin   mpirun, for tests/mpi.rs (four ranks of the stand-in target under a real
#                 launcher, and mpirun as the per-node launcher of rocprof-attach)
#
# Slurm is not installed: a single-node slurmctld + slurmd needs munge and a running daemon
# pair, which CI does not provide; the srun recipe is documented in docs/cluster.md.
set -eu

PACKAGES="openmpi-bin"

missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "ci-deps: already installed:$PACKAGES"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "ci-deps: need root to install:$missing (sudo $0)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
