"""Iteration multiplexing on the H200 (issue 27, item 3; docs/cuda.md "Several passes").

Runs from the kit as `python3 KIT/proof_mplex.py` (OUT=dir): a 3-pass set (14 metrics: ncu's
memory, instruction and cycle metrics) with `--replay-mode iteration`
- on grids.cu (known grids): every warps value exact, every kernel name given every metric;
- on the 12-layer transformer: kernel names given every group, values per pass, loss curve
  against an unattached run of the same seed, the step time before and while counting.
"""
import os
import shutil
import sqlite3
import subprocess
import sys
import time

K = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, K)
import proof_counters as pc  # noqa: E402

OUT = os.environ.get("OUT", "/tmp/out")
SET = ("sm__warps_launched.sum sm__ctas_launched.sum lts__t_sectors_op_read.sum dram__bytes_read.sum "
       "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum sm__inst_executed.sum lts__t_sectors_op_write.sum "
       "dram__bytes_write.sum smsp__sass_inst_executed_op_global_ld.sum sm__pipe_tensor_cycles_active.sum "
       "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum smsp__inst_executed_pipe_fma.sum "
       "gpc__cycles_elapsed.max sm__cycles_active.avg").split()
lines = []


def say(s=""):
    print(s, flush=True)
    lines.append(s)


def coverage(db):
    """Per kernel name: the counters it has, launches with values."""
    c = sqlite3.connect(db)
    per = {}
    for name, counter in c.execute("SELECT kernel_name, counter_name FROM counters_collection"):
        per.setdefault(name, set()).add(counter)
    disp = c.execute("SELECT COUNT(DISTINCT dispatch_id) FROM counters_collection").fetchone()[0]
    return per, disp


def report(r, db):
    say(f"  - exit {r.returncode}")
    for l in r.stderr.splitlines():
        if "counters" in l or "multiplexing" in l or "error" in l:
            say(f"  - {l.split('warning: ')[-1][:700]}")
    if not os.path.exists(db):
        say("  - no database")
        return {}
    per, disp = coverage(db)
    full = [n for n, s in per.items() if len(s) == len(SET)]
    say(f"  - {disp} dispatches with values; **{len(full)} of {len(per)} kernel names have all {len(SET)} metrics**")
    return per


def grids():
    say("\n## grids.cu, --replay-mode iteration, 14 metrics (3 passes)")
    exe = pc.build_grids(K, say)
    if not exe:
        return
    p = subprocess.Popen([exe, "--seconds", "100", "--log", "/tmp/gm.log"], stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    time.sleep(1.5)
    shutil.rmtree("/tmp/gm", ignore_errors=True)
    _, r = pc.attach(K, p.pid, 6000, ["--pmc", *SET, "--replay-mode", "iteration",
                                      "--kernel-iteration-range", "[1-3]"], "/tmp/gm", "m")
    report(r, "/tmp/gm/m_results.db")
    if os.path.exists("/tmp/gm/m_results.db"):
        pc.check_grids(say, "/tmp/gm/m_results.db", {})
    say(f"  - process alive: {p.poll() is None}")
    p.kill()


def torch():
    say("\n## transformer, --replay-mode iteration, 14 metrics (3 passes)")
    sys.path.insert(0, K)
    import proof as pf
    a = pf.start("transformer", "/tmp/tm0.log", steps=300, extra=["--seed", "7"])
    a.wait()
    b = pf.start("transformer", "/tmp/tm1.log", steps=300, extra=["--seed", "7"])
    time.sleep(4)
    shutil.rmtree("/tmp/tm", ignore_errors=True)
    t0, r = pc.attach(K, b.pid, 8000, ["--pmc", *SET, "--replay-mode", "iteration"], "/tmp/tm", "t")
    t1 = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    per = report(r, "/tmp/tm/t_results.db")
    b.wait()
    la = [s[3] for s in pf.steps_of("/tmp/tm0.log")]
    lb = [s[3] for s in pf.steps_of("/tmp/tm1.log")]
    say(f"  - loss curves of {len(la)} steps equal (unattached vs attached): **{la == lb}**")
    st = pf.steps_of("/tmp/tm1.log")
    before = [(e - s) / 1e6 for _, s, e, _ in st if e < t0]
    during = [(e - s) / 1e6 for _, s, e, _ in st if s >= t0 and e <= t1]
    say(f"  - step p50 before {pc.pct(before, .5):.1f} ms ({len(before)}), while attached "
        f"{pc.pct(during, .5):.1f} ms ({len(during)}), max while attached {max(during, default=0):.0f} ms")
    missing = {}
    for n, s in per.items():
        for m in set(SET) - s:
            missing[m] = missing.get(m, 0) + 1
    say(f"  - metrics missing per kernel name: {missing}")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    grids()
    torch()
    open(os.path.join(OUT, "mplex.md"), "w").write("\n".join(lines) + "\n")
