"""A PyTorch loop that ends during the window keeps its data (issue 29 item 3), on a real GPU.

For each way out (return, sys.exit, an uncaught exception, SIGTERM, SIGINT, os._exit, abort,
SIGKILL) the MLP loop runs 4 s of steps and ends while a 20 s kernel and runtime trace is
attached. Checked: the session's exit code (7), the database listed with its rows, its kernels
against the steps logged after the attach, `finished`/`ended_by` in the process's JSON, and that
`summary` and `convert -f pftrace` read it. Run from the kit: `python3 KIT/exit_check.py`
(results also in $OUT/cuda_exit_check.md).
"""
import json
import os
import sqlite3
import subprocess
import sys
import time

K = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("OUT", "/tmp/out")
RPA = os.path.join(K, "rocprof-attach")
BOOT = time.CLOCK_BOOTTIME
ROUTES = ["return", "sys_exit", "exception", "sigterm", "sigint", "os_exit", "abort", "sigkill"]
# EXIT_ROUTES="sigkill os_exit" runs only those; EXIT_REPEAT=5 runs each 5 times.
ROUTES = os.environ.get("EXIT_ROUTES", " ".join(ROUTES)).split()
REPEAT = int(os.environ.get("EXIT_REPEAT", "1"))


def one(how):
    d = f"/tmp/exit_check/{how}"
    subprocess.run(["rm", "-rf", d])
    os.makedirs(d)
    log = f"{d}/train.log"
    p = subprocess.Popen([sys.executable, os.path.join(K, "train.py"), "--model", "mlp", "--log", log,
                          "--seconds", "6", "--warmup", "30", "--end", how],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if line.startswith("ready"):
            break
    env = dict(os.environ, ROCPROF_ATTACH_CUDA_TOOL=os.path.join(K, "librocprof_cuda_tool.so"))
    t0 = time.clock_gettime_ns(BOOT)
    r = subprocess.run([RPA, "-p", str(p.pid), "--kernel-trace", "--runtime-trace", "-d", d, "-o", "run",
                        "--attach-duration-msec", "20000", "--json"], capture_output=True, text=True, env=env)
    status = p.wait()
    db = f"{d}/run_results.db"
    row = {"how": how, "exit": r.returncode, "status": status}
    try:
        rep = json.loads(r.stdout)
        row["rows"] = [f.get("rows") for f in rep.get("files", [])]
    except ValueError:
        row["rows"] = "no json"
    if os.path.exists(db):
        c = sqlite3.connect(db)
        row["kernels"] = c.execute("SELECT count(*) FROM rocpd_kernel_dispatch").fetchone()[0]
        row["finished"], row["ended_by"], committed, delivered = c.execute(
            "SELECT json_extract(extdata, '$.finished'), json_extract(extdata, '$.ended_by'), "
            "end, json_extract(extdata, '$.delivered_through_ns') FROM rocpd_info_process").fetchone()
        last_kernel = c.execute("SELECT max(end) FROM rocpd_kernel_dispatch").fetchone()[0] or 0
        steps = [l.split() for l in open(log) if l.startswith("step ")]
        last_step = max(int(s[3]) for s in steps)
        row["steps_after_attach"] = sum(1 for s in steps if int(s[2]) > t0)
        row["gap_s"] = round((last_step - last_kernel) / 1e9, 3)
        # The gap in parts: the last commit's time before the last step (the tool's tick), the
        # newest delivered row before that commit (CUPTI's delivery), the last kernel written
        # before the newest delivered row (our ordering lag).
        if committed and delivered:
            row["last_commit_before_last_step_s"] = round((last_step - committed) / 1e9, 3)
            row["delivered_before_commit_s"] = round((committed - delivered) / 1e9, 3)
            row["written_before_delivered_s"] = round((delivered - last_kernel) / 1e9, 3)
        # What the tool says of its last committing tick (flush, write, previous commit, time
        # since it, buffer size), its lag per kind and the rows written late (issue 29).
        ext = json.loads(c.execute("SELECT extdata FROM rocpd_info_process").fetchone()[0])
        row["tick"], row["lag_ns"] = ext.get("tick"), ext.get("lag_ns")
        row["late_records"] = ext.get("late_records")
        s = subprocess.run([RPA, "summary", "-i", db], capture_output=True, text=True)
        v = subprocess.run([RPA, "convert", "-i", db, "-f", "pftrace", "-d", d, "-o", "conv"],
                           capture_output=True, text=True)
        row["summary"], row["convert"] = s.returncode, v.returncode
    else:
        row["db"] = "missing"
    row["stderr"] = r.stderr.strip().splitlines()[-3:]
    return row


def main():
    os.makedirs(OUT, exist_ok=True)
    lines = ["| how | exit (want 7) | target status | rows listed | kernels | steps after attach | "
             "last step - last kernel (s) | finished / ended_by | summary, convert |", "|" + "---|" * 9]
    for how in [h for h in ROUTES for _ in range(REPEAT)]:
        r = one(how)
        print(json.dumps(r), flush=True)
        lines.append(f"| {how} | {r['exit']} | {r['status']} | {r.get('rows')} | {r.get('kernels')} | "
                     f"{r.get('steps_after_attach')} | {r.get('gap_s')} | {r.get('finished')} / "
                     f"{r.get('ended_by')} | {r.get('summary')}, {r.get('convert')} |")
    text = "\n".join(lines)
    print(text)
    open(os.path.join(OUT, "cuda_exit_check.md"), "w").write(text + "\n")


if __name__ == "__main__":
    main()
