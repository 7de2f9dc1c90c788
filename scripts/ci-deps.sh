#!/bin/sh
# Debian packages the test suite needs beyond the Rust toolchain, gcc and make.
# Called from .ci/run (as root); safe to run again.
#
#   gcc libc6-dev the C stand-ins (register library, targets, tools) are built at test time
#   openmpi-bin   mpirun, for tests/mpi.rs (four ranks of the stand-in target under a real
#                 launcher, and mpirun as the per-node launcher of rocprof-attach)
#   libcap2-bin   setcap, for the AT_SECURE test (a copy of rocprof-attach with a file capability)
#   util-linux    setpriv and unshare, for the permission and PID-namespace tests
#
# Slurm is not installed: a single-node slurmctld + slurmd needs munge and a running daemon
# pair, which CI does not provide; the srun recipe is documented in docs/cluster.md.
set -eu

PACKAGES="gcc libc6-dev openmpi-bin libcap2-bin util-linux"

missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "ci-deps: already installed:$PACKAGES"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "ci-deps: need root to install:$missing" >&2; exit 1; }
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
