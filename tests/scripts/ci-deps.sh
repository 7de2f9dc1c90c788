#!/bin/sh
# Debian packages the test suite needs beyond the Rust toolchain, gcc and make.
# Called from .ci/run (as root); safe to run again.
#
#   gcc libc6-dev the C stand-ins (register library, targets, tools) are built at test time
#   g++           cargo-fuzz builds libFuzzer (C++) for the fuzz run (tests/scripts/fuzz.sh)
#   openmpi-bin   mpirun, for tests/mpi.rs (four ranks of the stand-in target under a real
#                 launcher, and mpirun as the per-node launcher of rocprof-attach)
#   libcap2-bin   setcap, for the AT_SECURE test (a copy of rocprof-attach with a file capability,
#                 tests/security.rs)
#   util-linux    setpriv, unshare and nsenter, for the permission and PID-namespace tests
#                 (tests/security.rs, tests/trust.rs) and the test cluster's hosts (tests/cluster)
#   groff-base    groff, which renders the generated man pages without warnings (tests/trust.rs,
#                 tests/cli_docs.rs)
#   iproute2      `ip netns` and veth links: the test cluster's nodes, one network namespace each
#   slurm-wlm     slurmctld, slurmd and the client commands (srun, squeue, scancel), and
#   munge         munged: tests/nodes.rs starts its own Slurm on the test cluster (nothing is
#                 started by the packages: services are kept from starting during the install)
#   binutils      nm and readelf, for the C library's exported symbols and soname (tests/capi.rs)
#   python3 python3-venv  the Python package: ctypes client (tests/capi.rs), pip install into a
#                 fresh venv (tests/scripts/python-venv.sh, tests/python.rs); and a virtual
#                 environment (target/ci-venv) with PyPI's `perfetto` and `protobuf`, whose
#                 generated Perfetto protos decode our .pftrace files in tests/rocpd_pftrace.rs
#   libopen-trace-format2-dev  the OTF2 library the default build finds and links (convert -f otf2)
#   otf2-tools    otf2-print, which reads our OTF2 archives back in tests/rocpd_otf2.rs
#   chromium      headless Chromium renders the HTML summary in tests/rocpd_report.rs
#   tmux          a terminal for `rocprof-attach top`'s full-screen view, read back with
#                 `tmux capture-pane` (tests/top.rs)
#
# No test skips for a missing program or for not being root (CI runs as root): it fails and names
# the package (tests/prereq). ROCPROF_ATTACH_TEST_ALLOW_SKIP=1 skips instead, outside CI only.
set -eu

PACKAGES="gcc g++ libc6-dev openmpi-bin libcap2-bin util-linux groff-base iproute2 slurm-wlm munge binutils python3 python3-venv libopen-trace-format2-dev otf2-tools chromium tmux"

missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
install_packages() {
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || { echo "ci-deps: need root to install:$missing" >&2; exit 1; }
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    # The tests start their own munged and Slurm daemons; the packages' services must not start
    # (policy-rc.d exit 101: "action forbidden"), unless the machine already has a policy of its own.
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        trap '$SUDO rm -f "$policy"' EXIT
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
        $SUDO chmod 755 "$policy"
    fi
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $missing
}

if [ -z "$missing" ]; then
    echo "ci-deps: already installed:$PACKAGES"
else
    install_packages
fi

# PyPI packages for the Perfetto validation, in a virtual environment inside the checkout.
VENV="$(cd "$(dirname "$0")/../.." && pwd)/target/ci-venv"
if ! "$VENV/bin/python3" -c 'import perfetto.protos.perfetto.trace.perfetto_trace_pb2' 2>/dev/null; then
    PY=/usr/bin/python3
    [ -x "$PY" ] || PY=python3
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check perfetto protobuf
fi
echo "ci-deps: Perfetto protos in $VENV"
