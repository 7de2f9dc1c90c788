"""The CUDA backend's proof on a GPU machine (docs/cuda.md, "Measured"): run by
examples/cuda_kit.sh on the machine, with the kit built here. Writes $OUT/cuda_proof.md.

Phases (each a plain `python3 train.py`, started with no profiler opt-in):
  same     : the same seeded loop twice, once attached for 2 s: the loss curves must be equal;
             the first record's delay from the command's start; kernels per step in our database
  torch    : the same loop under torch.profiler for the same steps: kernel names and counts per step
  overhead : kernel tracing alone in interleaved 2 s on / 2 s off windows, p50/p99 step times;
             the same windows with torch.profiler (CUDA activity) for comparison
  cycles   : 100 attach/detach cycles on one process: alive, threads and RSS
  million  : a window with >= 1 M kernel records: detach (write) and convert -f pftrace times
  pmc, pmctorch : counters (--pmc), in proof_counters.py
  spm      : sampled counters (--spm) on the transformer, in proof_spm.py
"""
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time

K = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("OUT", "/tmp/out")
RPA = os.path.join(K, "rocprof-attach")
BOOT = time.CLOCK_BOOTTIME
report = []
facts = {}


def say(line=""):
    print(line, flush=True)
    report.append(line)


def start(model, log, extra=(), seconds=60, steps=0):
    cmd = [sys.executable, os.path.join(K, "train.py"), "--model", model, "--log", log,
           "--seconds", str(seconds), "--steps", str(steps), *extra]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if line.startswith("ready"):
            return p
    raise SystemExit(f"{model} did not start: {p.wait()}")


def attach(pid, ms, opts, outdir, name="run"):
    t0 = time.clock_gettime_ns(BOOT)
    r = subprocess.run([RPA, "-p", str(pid), *opts, "-d", outdir, "-o", name,
                        "--attach-duration-msec", str(ms), "--json"],
                       capture_output=True, text=True)
    t1 = time.clock_gettime_ns(BOOT)
    if r.returncode != 0:
        say(f"    rocprof-attach exit {r.returncode}: {r.stderr.strip()[-600:]}")
    return t0, t1, r


def steps_of(log):
    out = []
    for line in open(log):
        f = line.split()
        if f[0] == "step":
            out.append((int(f[1]), int(f[2]), int(f[3]), f[4]))
    return out


def kernels(db):
    c = sqlite3.connect(db)
    return c.execute("SELECT name, start, end FROM kernels ORDER BY start").fetchall()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def per_step(steps, ks):
    """Kernel names per step for the steps wholly inside the traced time."""
    if not ks:
        return {}
    import bisect
    lo, hi = ks[0][1], ks[-1][2]
    starts = [k[1] for k in ks]
    out = {}
    for i, t0, t1, _ in steps:
        if t0 < lo or t1 > hi:
            continue
        a, b = bisect.bisect_left(starts, t0), bisect.bisect_right(starts, t1)
        out[i] = [k[0] for k in ks[a:b]]
    return out


def phase_same(model, opts):
    say(f"\n## {model}: loss curve, first record, kernels per step")
    n = 4000 if model == "mlp" else 250
    a = start(model, "/tmp/a.log", steps=n, extra=["--seed", "7"])
    a.wait()
    b = start(model, "/tmp/b.log", steps=n, extra=["--seed", "7"])
    t0, t1, r = attach(b.pid, 2000, opts, "/tmp/pa", f"same_{model}")
    b.wait()
    la, lb = [s[3] for s in steps_of("/tmp/a.log")], [s[3] for s in steps_of("/tmp/b.log")]
    say(f"- loss curves of {len(la)} steps equal (unattached vs attached): **{la == lb}**")
    db = f"/tmp/pa/same_{model}_results.db"
    if not os.path.exists(db):
        say(f"- no database: {r.stdout[-400:]} {r.stderr[-400:]}")
        return None
    ks = kernels(db)
    first = (ks[0][1] - t0) / 1e6 if ks else float("nan")
    say(f"- command start to first kernel record: **{first:.1f} ms**; {len(ks)} kernels in the window")
    ps = per_step(steps_of("/tmp/b.log"), ks)
    counts = sorted({len(v) for v in ps.values()})
    say(f"- kernels per step over {len(ps)} whole steps: {counts}")
    try:
        j = json.loads(r.stdout)
        say(f"- session: exit {j.get('exit_code')}, files {[f.get('path') for f in j.get('files', [])][:4]}")
    except Exception:
        pass
    return ps


def phase_torch(model, ours):
    say(f"\n## {model}: torch.profiler, same seed, same steps")
    if not ours:
        say("- skipped (no database)")
        return
    s0 = min(ours) ; s1 = s0 + min(20, len(ours))
    p = start(model, "/tmp/c.log", steps=s1 + 5, extra=["--seed", "7", "--torch-profile", f"{s0}:{s1}",
                                                          "--trace", "/tmp/tp.json"])
    p.wait()
    ev = json.load(open("/tmp/tp.json"))["traceEvents"]
    theirs = sorted(e["name"] for e in ev if e.get("cat") == "kernel")
    mine = sorted(n for i in range(s0, s1) for n in ours.get(i, []))
    same = theirs == mine
    say(f"- steps {s0}..{s1 - 1}: torch.profiler {len(theirs)} kernels, ours {len(mine)}; names and counts equal: **{same}**")
    if not same:
        from collections import Counter
        d = (Counter(theirs) - Counter(mine)) + (Counter(mine) - Counter(theirs))
        say(f"  - differences (first 5): {list(d.items())[:5]}")


def windows_stats(steps, on):
    ins, outs = [], []
    for _, t0, t1, _ in steps:
        d = (t1 - t0) / 1e6
        (ins if any(a <= t0 and t1 <= b for a, b in on) else outs).append(d)
    return ins, outs


def phase_overhead(model, cycles=5, on_s=2.0, off_s=2.0):
    say(f"\n## {model}: overhead, kernel trace only, {cycles} x ({on_s:.0f} s on, {off_s:.0f} s off)")
    p = start(model, "/tmp/o.log", seconds=cycles * (on_s + off_s) + 6)
    on = []
    time.sleep(1.0)
    for c in range(cycles):
        t0, t1, r = attach(p.pid, int(on_s * 1000), ["--kernel-trace"], "/tmp/po", f"o{c}")
        on.append((t0 + 150_000_000, t0 + int(on_s * 1e9)))
        time.sleep(off_s)
    p.wait()
    ins, outs = windows_stats(steps_of("/tmp/o.log"), on)
    say(f"- rocprof-attach: on p50 {pct(ins, .5):.3f} ms p99 {pct(ins, .99):.3f} ms ({len(ins)} steps); "
        f"off p50 {pct(outs, .5):.3f} ms p99 {pct(outs, .99):.3f} ms ({len(outs)} steps); "
        f"**{(pct(ins, .5) / pct(outs, .5) - 1) * 100:+.1f} %** at p50")
    facts[f"{model}_ours"] = (pct(ins, .5), pct(outs, .5))
    for who in ("torch", "floor"):
        p = start(model, f"/tmp/{who}.log", seconds=cycles * (on_s + off_s) + 6,
                  extra=[f"--{who}-windows", f"{on_s}:{off_s}"])
        p.wait()
        st = steps_of(f"/tmp/{who}.log")
        marks = [l.split() for l in open(f"/tmp/{who}.log") if l.startswith(who)]
        won, cur = [], None
        for m in marks:
            if m[1] == "on":
                cur = int(m[2]) + 150_000_000
            elif m[1] == "stop" and cur:
                won.append((cur, int(m[2])))
                cur = None
        stops = [(int(b[2]) - int(a[2])) / 1e6 for a, b in zip(marks, marks[1:]) if a[1] == "stop" and b[1] == "off"]
        ins, outs = windows_stats(st, won)
        label = "torch.profiler" if who == "torch" else "bare CUPTI (the floor: cupti_floor.c)"
        say(f"- {label}: on p50 {pct(ins, .5):.3f} ms p99 {pct(ins, .99):.3f} ms ({len(ins)} steps); "
            f"off p50 {pct(outs, .5):.3f} ms ({len(outs)} steps); **{(pct(ins, .5) / pct(outs, .5) - 1) * 100:+.1f} %** "
            f"at p50; each stop held the loop {statistics.median(stops) if stops else 0:.0f} ms (median)")


def rss_threads(pid):
    st = open(f"/proc/{pid}/status").read().split("\n")
    g = {l.split(":")[0]: l.split(":")[1].strip() for l in st if ":" in l}
    return int(g["VmRSS"].split()[0]), int(g["Threads"])


def phase_cycles(model="mlp", n=100):
    say(f"\n## {model}: {n} attach/detach cycles on one process")
    p = start(model, "/tmp/y.log", seconds=600)
    before = rss_threads(p.pid)
    fails, times = 0, []
    first = None
    for c in range(n):
        if c == 1:
            first = rss_threads(p.pid)
        t0, t1, r = attach(p.pid, 50, ["--kernel-trace"], "/tmp/py", f"y{c}")
        fails += r.returncode != 0
        times.append((t1 - t0) / 1e6)
        if p.poll() is not None:
            break
    alive = p.poll() is None
    last = rss_threads(p.pid) if alive else (0, 0)
    n0 = len(steps_of("/tmp/y.log"))
    time.sleep(0.5)
    n1 = len(steps_of("/tmp/y.log"))
    p.kill()
    say(f"- alive after {n} cycles: **{alive}**; failed sessions {fails}; training went on: {n1 > n0}")
    say(f"- before any session: RSS {before[0] / 1024:.0f} MiB, {before[1]} threads; after the first: "
        f"{first[0] / 1024:.0f} MiB, {first[1]} threads; after {n}: {last[0] / 1024:.0f} MiB, {last[1]} threads")
    say(f"- whole session (50 ms window): p50 {pct(times, .5):.0f} ms, max {max(times):.0f} ms")


def phase_million():
    say("\n## many: a window with about 1 M kernel records")
    shutil.rmtree("/tmp/pm", ignore_errors=True)  # a database left there would make ours m_1_results.db
    p = start("many", "/tmp/m.log", seconds=120)
    t0, t1, r = attach(p.pid, 24000, ["--kernel-trace", "-vv"], "/tmp/pm", "m")
    p.kill()
    db = "/tmp/pm/m_results.db"
    if not os.path.exists(db):
        say(f"- no database: {r.stderr[-600:]}")
        return
    c = sqlite3.connect(db)
    kd = c.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_kernel_dispatch%'").fetchone()[0]
    n = c.execute(f"SELECT COUNT(*) FROM {kd}").fetchone()[0]
    late = c.execute(f"SELECT COUNT(*), MAX(m - start) FROM (SELECT start, MAX(start) OVER (ORDER BY id ROWS "
                     f"BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS m FROM {kd}) WHERE start < m").fetchone()
    say(f"- rows out of start order (id order): {late[0]}, at most {(late[1] or 0) / 1e6:.1f} ms behind")
    det = [l for l in r.stderr.split("\n") if "detached from" in l]
    wrote = [l for l in r.stderr.split("\n") if "the CUDA tool wrote" in l]
    if wrote:
        say(f"- {wrote[0].split('DEBUG ')[-1]}")
    say(f"- {n} kernel records; {det[0].split('rocprof-attach: ')[-1] if det else 'detach time unknown'}")
    c0 = time.monotonic()
    rc = subprocess.run([RPA, "convert", "-i", db, "-f", "pftrace", "-d", "/tmp/pm/conv", "-o", "m", "--force"],
                        capture_output=True, text=True)
    say(f"- convert -f pftrace: {time.monotonic() - c0:.2f} s (exit {rc.returncode})")


def phase_ddp():
    say("\n## 2-rank torchrun job (DDP, one GPU per rank): one command attaches both ranks")
    # NVLink multicast (NVLS) hangs NCCL's start-up in the GPU machine's VMs: off.
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    p = subprocess.Popen(["torchrun", "--nproc-per-node", "2", os.path.join(K, "ddp.py"), "--seconds", "40"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    ready = []
    for line in p.stdout:
        if line.startswith("ready"):
            ready.append(line.split()[1])
            if len(ready) == 2:
                break
    t0 = time.monotonic()
    r = subprocess.run([RPA, "--match", "ddp.py", "--kernel-trace", "--memory-copy-trace", "-d", "/tmp/pd",
                        "-o", "rank_%pid%", "--attach-duration-msec", "2000"], capture_output=True, text=True)
    say(f"- `rocprof-attach --match ddp.py --kernel-trace --memory-copy-trace`: exit {r.returncode} in "
        f"{time.monotonic() - t0:.1f} s (ranks {', '.join(ready)})")
    for line in r.stderr.strip().split("\n")[-6:]:
        say(f"  - {line}")
    dbs = sorted(f"/tmp/pd/{f}" for f in os.listdir("/tmp/pd") if f.endswith("_results.db")) if os.path.isdir("/tmp/pd") else []
    for db in dbs:
        c = sqlite3.connect(db)
        n = c.execute("SELECT COUNT(*) FROM kernels").fetchone()[0]
        agents = c.execute("SELECT DISTINCT agent_abs_index FROM kernels").fetchall()
        say(f"- {os.path.basename(db)}: {n} kernels on agent {agents}")
    c = subprocess.run([RPA, "convert", "-i", *dbs, "-f", "pftrace", "-d", "/tmp/pd/conv", "-o", "both", "--force"],
                       capture_output=True, text=True)
    files = os.listdir("/tmp/pd/conv") if os.path.isdir("/tmp/pd/conv") else []
    say(f"- convert -f pftrace of both databases: exit {c.returncode}, {files}")
    p.wait()


def main():
    os.makedirs(OUT, exist_ok=True)
    say("# CUDA backend proof")
    say(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip())
    which = sys.argv[1:] or ["same", "torch", "overhead", "cycles", "million"]
    ours = None
    if "same" in which:
        ours = phase_same("mlp", ["--kernel-trace", "--memory-copy-trace", "--runtime-trace"])
    if "torch" in which:
        phase_torch("mlp", ours)
    if "transformer" in which:
        t = phase_same("transformer", ["--kernel-trace", "--memory-copy-trace", "--runtime-trace"])
        phase_torch("transformer", t)
    if "overhead" in which:
        phase_overhead("mlp", cycles=8)
        phase_overhead("transformer", cycles=6)
    if "cycles" in which:
        phase_cycles()
    if "million" in which:
        phase_million()
    if "ddp" in which:
        phase_ddp()
    if "pmc" in which or "pmctorch" in which:
        sys.path.insert(0, K)
        import proof_counters
        if "pmc" in which:
            proof_counters.phase_pmc(K, say)
        if "pmctorch" in which:
            proof_counters.phase_pmctorch(K, say, start, steps_of)
    if "spm" in which:
        sys.path.insert(0, K)
        import proof_counters
        import proof_spm
        proof_spm.phase_spm(K, say, start, steps_of, proof_counters.blocked)
    open(os.path.join(OUT, "cuda_proof.md"), "w").write("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
