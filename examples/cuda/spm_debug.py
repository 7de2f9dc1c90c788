"""Why a target dies under --spm: each variant attaches one 1 s --spm session to a fresh target
(the CUDA C grids program, then the MLP and the transformer under `python3 -X faulthandler`) and
prints the session's exit, the target's status (negative: the signal that ended it) and the tail
of the target's stderr. Run from the kit: `python3 KIT/spm_debug.py`.
"""
import os
import subprocess
import sys
import time

K = os.path.dirname(os.path.abspath(__file__))
RPA = os.path.join(K, "rocprof-attach")
sys.path.insert(0, K)
import proof_counters  # noqa: E402

BASE = ["--spm-beta-enabled", "--spm-sample-interval", "1000", "--attach-duration-msec", "1000"]
VARIANTS = [
    ("spm default set", ["--spm"]),
    ("spm one metric", ["--spm", "gpc__cycles_elapsed.max"]),
    ("spm + kernel trace", ["--spm", "sm__cycles_active.avg", "gpc__cycles_elapsed.max", "--kernel-trace"]),
]


def target(cmd, log):
    err = open(log, "w")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    for line in p.stdout:
        if line.startswith("ready") or line.startswith("grids"):
            break
    time.sleep(3)
    return p


def one(name, cmd, opts):
    log = f"/tmp/spmdbg_{abs(hash(name + ' '.join(cmd))) % 100000}.err"
    p = target(cmd, log)
    env = dict(os.environ, ROCPROF_ATTACH_CUDA_TOOL=os.path.join(K, "librocprof_cuda_tool.so"))
    r = subprocess.run([RPA, "-p", str(p.pid), *BASE, *opts, "-d", "/tmp/spmdbg", "-o", "s", "-v"],
                       capture_output=True, text=True, env=env)
    time.sleep(2)
    status = p.poll()
    if status is None:
        p.kill()
    tail = open(log).read()[-1500:]
    print(f"## {name} on {os.path.basename(cmd[-1] if 'train' not in ' '.join(cmd) else 'train')}: "
          f"session exit {r.returncode}; target status {status} (None: alive)")
    print("   session: " + " | ".join(r.stderr.strip().splitlines()[-8:])[:1500])
    print("   target stderr tail: " + tail.replace("\n", " | "))


def main():
    exe = proof_counters.build_grids(K, print)
    grids = [exe, "--seconds", "60", "--log", "/dev/null"]
    for name, opts in VARIANTS:
        one(name, grids, opts)
    for model in ("mlp", "transformer"):
        cmd = [sys.executable, "-X", "faulthandler", os.path.join(K, "train.py"), "--model", model,
               "--log", "/dev/null", "--seconds", "60"]
        one("spm default set", cmd, ["--spm"])


main()
