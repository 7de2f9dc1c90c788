#!/bin/sh
# Fetch NVIDIA's CUPTI headers (CUDA 13) for the GPU-free CUDA stand-ins of the tests
# (tests/fixtures/cuda/fake_cupti.c is compiled against the real cupti.h, so that its records have
# the real layouts). Usage: tests/prereq/cupti_headers.sh [DEST]  (default: target/cupti-headers
# of the checkout). Afterwards DEST/cupti.h exists.
#
# The headers come from PyPI wheels, the only place NVIDIA publishes them without an installer:
# nvidia-cuda-cupti (cupti*.h), nvidia-cuda-runtime (cuda.h, builtin_types.h, which cupti.h
# includes) and nvidia-cuda-crt (crt/host_defines.h, which those include). All three put them in
# nvidia/cu13/include/. Only that folder is kept; the libraries in the wheels are not.
#
# The versions are pinned, so that every run compiles against the same record layouts; set
# CUPTI_HEADERS_PINS (space-separated name==version) to try others. A second run finds DEST/cupti.h
# and does nothing. Two runs at once are safe: each extracts into its own temporary folder beside
# DEST and renames it into place; the one that finds DEST taken keeps the other's.
#
# Needs python3 (pip is used when present, else PyPI's JSON API through urllib) and access to
# pypi.org; the headers are not committed (target/ is ignored).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-$here/../../target/cupti-headers}
[ -f "$dest/cupti.h" ] && exit 0

pins=${CUPTI_HEADERS_PINS:-"nvidia-cuda-cupti==13.5.25 nvidia-cuda-runtime==13.5.37 nvidia-cuda-crt==13.5.37"}
fix="install python3 (and python3-pip) and allow access to pypi.org, or unpack include/ of the wheels $pins into $dest yourself"

if ! command -v python3 >/dev/null 2>&1; then
    echo "cupti_headers.sh: python3 not found; $fix" >&2
    exit 1
fi

parent=$(dirname "$dest")
mkdir -p "$parent"
work=$(mktemp -d "$parent/.cupti-headers.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# shellcheck disable=SC2086 # $pins is a list
if ! python3 - "$work" "$dest" $pins >"$work/log" 2>&1 <<'EOF'
import glob, json, os, subprocess, sys, urllib.parse, urllib.request, zipfile

work, dest, pins = sys.argv[1], sys.argv[2], sys.argv[3:]
wheels = os.path.join(work, "wheels")
os.makedirs(wheels)

def fetch_with_pip():
    r = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if r.returncode != 0:
        return False
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--disable-pip-version-check", "--only-binary=:all:", "-d", wheels] + pins,
                   check=True)
    return True

def fetch_with_json_api():
    # Any wheel of the pinned version will do: the headers are the same in every one.
    for pin in pins:
        name, version = pin.split("==")
        api = f"https://pypi.org/pypi/{name}/json"
        with urllib.request.urlopen(api) as r:
            files = [u for u in json.load(r)["releases"][version] if u["filename"].endswith(".whl")]
        files.sort(key=lambda u: "x86_64" not in u["filename"])
        # A mirror may answer with URLs relative to the API's.
        url = urllib.parse.urljoin(api, files[0]["url"])
        urllib.request.urlretrieve(url, os.path.join(wheels, files[0]["filename"]))

if not fetch_with_pip():
    fetch_with_json_api()

out = os.path.join(work, "include")
for whl in glob.glob(os.path.join(wheels, "*.whl")):
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            # nvidia/<cu13 or package>/include/<header path>
            if len(parts) < 4 or parts[0] != "nvidia" or parts[2] != "include" or info.is_dir():
                continue
            target = os.path.join(out, *parts[3:])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(info) as src, open(target, "wb") as dst:
                dst.write(src.read())
if not os.path.exists(os.path.join(out, "cupti.h")):
    sys.exit("no nvidia/*/include/cupti.h in the wheels")
if not os.path.exists(os.path.join(out, "cuda.h")):
    sys.exit("no nvidia/*/include/cuda.h in the wheels")
try:
    os.rename(out, dest)
except OSError:
    # Another run got there first (dest exists and is not empty): keep its copy.
    if not os.path.exists(os.path.join(dest, "cupti.h")):
        raise
EOF
then
    echo "cupti_headers.sh: could not fetch the CUPTI headers ($(tail -n 1 "$work/log")); $fix" >&2
    exit 1
fi
