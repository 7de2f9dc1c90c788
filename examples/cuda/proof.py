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
  top      : `rocprof-attach top --batch` on the 12-layer transformer for 10 s (docs/top.md):
             every kernel's totals against `summary` of the kept database, the step time while
             watched and after, top's own CPU, and the batch screen as text
  topddp   : `top --match ddp.py` on a 2-rank torchrun job: both ranks in one view (2 GPUs)
  soak     : (not in the default set) SOAK_MINUTES (10) on the transformer, a session every 2 s
             with all tracing, the front end SIGKILLed at a random moment of its window in one
             session of five: target deaths, threads and RSS, sessions complete or finished by
             the agent, anything left for a person, the step time after each killed session
  pmc, pmctorch : counters (--pmc), in proof_counters.py
  residue  : step time and RSS unattached, after one session and after 20 more
  spm      : sampled counters (--spm) on the transformer, in proof_spm.py
  topspm   : `top --spm --batch` on the transformer (issue 28), in proof_spm.py
"""
import random
import signal
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


def start_ddp(seconds):
    """A 2-rank torchrun job of ddp.py, once both ranks are ready: (process, rank pids)."""
    # NVLink multicast (NVLS) hangs NCCL's start-up in the GPU machine's VMs: off.
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    p = subprocess.Popen(["torchrun", "--nproc-per-node", "2", os.path.join(K, "ddp.py"), "--seconds", str(seconds)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    ready = []
    for line in p.stdout:
        if line.startswith("ready"):
            ready.append(line.split()[1])
            if len(ready) == 2:
                break
    return p, ready


def say_marks(log, marks, ends):
    """Step p50/p90, RSS and threads of each stretch: marks (name, start, (rss, threads)) to ends."""
    steps = steps_of(log)
    for (name, t, (rss, thr)), e in zip(marks, ends):
        xs = [(b - a) / 1e6 for _, a, b, _ in steps if a >= t and b <= e]
        say(f"- {name}: step p50 {pct(xs, .5):.2f} ms, p90 {pct(xs, .9):.2f} ms ({len(xs)} steps); "
            f"RSS {rss / 1024:.0f} MiB, threads {thr}")


def phase_ddp():
    say("\n## 2-rank torchrun job (DDP, one GPU per rank): one command attaches both ranks")
    p, ready = start_ddp(40)
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


def top_totals(lines):
    """The final table of `top --batch --full-names`: kernel name -> (launches, total ns)."""
    out, on = {}, False
    for line in lines:
        if line.startswith("rocprof-attach top - totals since the start"):
            on = True
        elif on and line.strip().startswith("ALL_LAUNCHES"):
            on = "rows"
        elif on == "rows":
            f = line.split()
            if len(f) < 5 or not f[0].isdigit():
                break
            name = line.split(None, 4)[4]
            out[name] = (int(f[0]), int(f[1]))
    return out


def summary_totals(dbs, outdir):
    shutil.rmtree(outdir, ignore_errors=True)
    r = subprocess.run([RPA, "summary", "-i", *dbs, "--format", "csv", "-d", outdir],
                       capture_output=True, text=True)
    if r.returncode != 0:
        say(f"    summary exit {r.returncode}: {r.stderr.strip()[-400:]}")
        return {}
    import csv
    f = next(os.path.join(outdir, n) for n in os.listdir(outdir) if n.endswith("kernel_stats.csv"))
    return {row[0]: (int(row[1]), int(row[2])) for row in list(csv.reader(open(f)))[1:]}


def phase_top(model="transformer", watch_s=10, off_s=10):
    say(f"\n## `rocprof-attach top --batch` on the {model} for {watch_s} s (docs/top.md)")
    p = start(model, "/tmp/top.log", seconds=watch_s + off_s + 12)
    time.sleep(2.0)
    shutil.rmtree("/tmp/ptop", ignore_errors=True)
    cmd = [RPA, "top", "-p", str(p.pid), "--batch", "--full-names", "--interval", "1s",
           "-n", str(watch_s), "-d", "/tmp/ptop"]
    t0 = time.clock_gettime_ns(BOOT)
    q = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = q.communicate()
    t1 = time.clock_gettime_ns(BOOT)
    lines = out.split("\n")
    open(os.path.join(OUT, "top_batch.txt"), "w").write(out)
    say(f"- `{' '.join(['rocprof-attach'] + cmd[1:])}`: exit {q.returncode} in {(t1 - t0) / 1e9:.1f} s")
    for line in err.strip().split("\n")[-4:]:
        say(f"  - {line}")
    cpu = [l for l in lines if "top's own CPU:" in l]
    say(f"- {cpu[-1].replace('note: ', '') if cpu else 'no CPU line'} (interval 1 s)")
    per = [l.split("top's own CPU ")[1] for l in lines if "; top's own CPU " in l]
    say(f"- own CPU per interval: {', '.join(per)}")
    time.sleep(off_s)
    p.wait()
    ins, outs = windows_stats(steps_of("/tmp/top.log"), [(t0 + 500_000_000, t1)])
    base = facts.get(f"{model}_ours")
    say(f"- step time while watched: p50 {pct(ins, .5):.3f} ms ({len(ins)} steps); not watched p50 "
        f"{pct(outs, .5):.3f} ms ({len(outs)} steps): **{(pct(ins, .5) / pct(outs, .5) - 1) * 100:+.1f} %**"
        + (f"; kernel tracing alone (overhead phase): {(base[0] / base[1] - 1) * 100:+.1f} %" if base else ""))
    dbs = sorted(os.path.join(d, f) for d, _, fs in os.walk("/tmp/ptop") for f in fs if f.endswith("_results.db"))
    ours, theirs = top_totals(lines), summary_totals(dbs, "/tmp/ptop_sum")
    worst, bad = 0.0, []
    for name, (n, ns) in theirs.items():
        tn, tns = ours.get(name, (0, 0))
        rel = max(abs(tn - n) / max(n, 1), abs(tns - ns) / max(ns, 1))
        worst = max(worst, rel)
        if rel > 0.01:
            bad.append(f"{name[:60]}: top {tn}/{tns} ns, summary {n}/{ns} ns")
    say(f"- per-kernel totals, top's final table vs `summary` of {dbs}: {len(theirs)} kernels in summary, "
        f"{len(ours)} on top's screen; largest difference **{worst * 100:.3f} %**; over 1 %: {len(bad)}")
    for b in bad[:5]:
        say(f"  - {b}")
    say("- the last interval's table (text capture of the batch screen):")
    say("```")
    tables = [i for i, l in enumerate(lines) if l.startswith("rocprof-attach top - interval")]
    shot = lines[tables[-1]:] if tables else lines[-40:]
    for l in shot[:40]:
        say(l[:160])
    say("```")


def phase_top_ddp():
    say("\n## `rocprof-attach top --match ddp.py` on a 2-rank torchrun job: both ranks in one view")
    p, ready = start_ddp(30)
    r = subprocess.run([RPA, "top", "--match", "ddp.py", "--batch", "--interval", "1s", "-n", "5"],
                       capture_output=True, text=True)
    say(f"- exit {r.returncode}; ranks {', '.join(ready)}")
    lines = r.stdout.split("\n")
    tables = [i for i, l in enumerate(lines) if l.startswith("rocprof-attach top - interval")]
    say("```")
    for l in (lines[tables[-1]:tables[-1] + 20] if tables else lines[-20:]):
        say(l[:160])
    say("```")
    for line in r.stderr.strip().split("\n")[-4:]:
        say(f"  - {line}")
    p.wait()
def soak_session(pid, c, kill, opts, outdir):
    """One session of the soak; (what happened, kill time in CLOCK_BOOTTIME ns or None)."""
    cmd = [RPA, "-p", str(pid), *opts, "-d", outdir, "-o", f"s{c}", "--attach-duration-msec", "1000"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if not kill:
        err = p.communicate()[1]
        if p.returncode == 4 and "--detach" in err:
            return "left for a person", None
        return ("complete" if p.returncode == 0 else f"exit {p.returncode}: {err.strip()[-300:]}"), None
    seen = []
    for line in p.stderr:
        seen.append(line)
        if "profiling for" in line:
            break
    else:
        p.wait()
        if p.returncode == 4 and any("--detach" in l for l in seen):
            return "left for a person", None
        return f"exit {p.returncode} before its window: {''.join(seen).strip()[-300:]}", None
    time.sleep(random.uniform(0.0, 0.9))
    os.kill(p.pid, signal.SIGKILL)
    at = time.clock_gettime_ns(BOOT)
    p.wait()
    return "killed", at


def phase_soak(model="transformer"):
    minutes = float(os.environ.get("SOAK_MINUTES", "10"))
    opts = ["--kernel-trace", "--memory-copy-trace", "--runtime-trace"]
    say(f"\n## {model}: {minutes:.0f}-minute soak, a session every 2 s ({' '.join(opts)}), the front end "
        f"SIGKILLed in one session of five")
    seed = int(os.environ.get("SOAK_SEED", str(os.getpid())))
    random.seed(seed)
    shutil.rmtree("/tmp/ps", ignore_errors=True)
    p = start(model, "/tmp/s.log", seconds=minutes * 60 + 60)
    time.sleep(5.0)  # the baseline: steps before any session
    t_base = time.clock_gettime_ns(BOOT)
    samples = [rss_threads(p.pid)]
    outcomes, kills = {}, []
    end = time.monotonic() + minutes * 60
    c = 0
    while time.monotonic() < end and p.poll() is None:
        t = time.monotonic()
        what, at = soak_session(p.pid, c, random.randrange(5) == 0, opts, "/tmp/ps")
        outcomes.setdefault(what.split(":")[0], []).append(c)
        if at:
            kills.append((c, at))
        if c % 15 == 0 and p.poll() is None:
            samples.append(rss_threads(p.pid))
        c += 1
        time.sleep(max(0.0, 2.0 - (time.monotonic() - t)))
    alive = p.poll() is None
    # After the last session: a plain one must work (it waits for an agent still finishing).
    final = soak_session(p.pid, c, False, opts, "/tmp/ps")[0] if alive else "target dead"
    time.sleep(4.0)
    if alive:
        samples.append(rss_threads(p.pid))
    p.kill()
    steps = steps_of("/tmp/s.log")
    base = [(b - a) / 1e6 for _, a, b, _ in steps if b <= t_base]
    # Back at the baseline within a second of a killed session: steps starting 1-2 s after each kill
    # (the next session starts about 2 s after the previous one did).
    after = [(b - a) / 1e6 for _, a, b, _ in steps for _, k in kills if k + 1e9 <= a and b <= k + 2e9]
    tail = [(b - a) / 1e6 for _, a, b, _ in steps if a >= time.clock_gettime_ns(BOOT) - 3.5e9]
    finished = [k for k, _ in kills if os.path.exists(f"/tmp/ps/s{k}_results.db")
                and os.path.getsize(f"/tmp/ps/s{k}_results.db") > 0]
    agents = subprocess.run(["pgrep", "-x", "rocprof-attach"], capture_output=True, text=True).stdout.split()
    say(f"- SOAK_SEED={seed}; {c} sessions in {minutes:.0f} min; target alive: **{alive}** (deaths: {0 if alive else 1})")
    say("- outcomes: " + ", ".join(f"{k} {len(v)}" for k, v in sorted(outcomes.items())))
    say(f"- killed sessions whose database the agent wrote: **{len(finished)} of {len(kills)}**; "
        f"left for a person: **{len(outcomes.get('left for a person', []))}**; final plain session: {final}; "
        f"rocprof-attach processes left: {len(agents)}")
    say(f"- RSS MiB first/min/max/last: {samples[0][0] / 1024:.0f}/{min(x[0] for x in samples) / 1024:.0f}/"
        f"{max(x[0] for x in samples) / 1024:.0f}/{samples[-1][0] / 1024:.0f}; threads first/min/max/last: "
        f"{samples[0][1]}/{min(x[1] for x in samples)}/{max(x[1] for x in samples)}/{samples[-1][1]}")
    say(f"- step p50: baseline {pct(base, .5):.2f} ms ({len(base)} steps); 1-2 s after each kill "
        f"{pct(after, .5):.2f} ms ({len(after)} steps); after the soak {pct(tail, .5):.2f} ms ({len(tail)} steps)")


def phase_residue(model="transformer"):
    """What stays behind after sessions end: step time and RSS of a loop never attached (two
    10 s stretches, for drift), after one session, and after 20 more (4 front ends killed)."""
    opts = ["--kernel-trace", "--memory-copy-trace", "--runtime-trace"]
    say(f"\n## {model}: what stays behind after sessions ({' '.join(opts)})")
    shutil.rmtree("/tmp/pr", ignore_errors=True)
    p = start(model, "/tmp/r.log", seconds=240)
    time.sleep(15.0)
    marks = [("unattached", time.clock_gettime_ns(BOOT), rss_threads(p.pid))]
    time.sleep(10.0)
    marks.append(("unattached, 10 s later", time.clock_gettime_ns(BOOT), rss_threads(p.pid)))
    time.sleep(10.0)
    end_of = [time.clock_gettime_ns(BOOT)]
    what = soak_session(p.pid, 0, False, opts, "/tmp/pr")[0]
    time.sleep(1.0)
    marks.append((f"after 1 session ({what})", time.clock_gettime_ns(BOOT), rss_threads(p.pid)))
    time.sleep(10.0)
    end_of.append(time.clock_gettime_ns(BOOT))
    outcomes = []
    for c in range(1, 21):
        t = time.monotonic()
        outcomes.append(soak_session(p.pid, c, c % 5 == 0, opts, "/tmp/pr")[0])
        time.sleep(max(0.0, 2.0 - (time.monotonic() - t)))
    time.sleep(2.0)
    marks.append(("after 21 sessions", time.clock_gettime_ns(BOOT), rss_threads(p.pid)))
    time.sleep(10.0)
    end_of.append(time.clock_gettime_ns(BOOT))
    p.kill()
    say("- sessions: " + ", ".join(f"{k} {outcomes.count(k)}" for k in sorted(set(outcomes))))
    say_marks("/tmp/r.log", marks, [marks[1][1], end_of[0], end_of[1], end_of[2]])


def phase_residue_pmc(model="transformer"):
    """The step time unattached, then after one --pmc session (whose counters stay configured,
    so CUPTI stays initialised), then after a tracing session."""
    say(f"\n## {model}: what stays behind after a --pmc session")
    shutil.rmtree("/tmp/prp", ignore_errors=True)
    p = start(model, "/tmp/rp.log", seconds=120)
    time.sleep(12.0)
    marks = [("unattached", time.clock_gettime_ns(BOOT), rss_threads(p.pid))]
    time.sleep(8.0)
    ends = [time.clock_gettime_ns(BOOT)]
    r = subprocess.run([RPA, "-p", str(p.pid), "--pmc", "SQ_WAVES", "-d", "/tmp/prp", "-o", "p",
                        "--attach-duration-msec", "2000"], capture_output=True, text=True)
    time.sleep(1.0)
    marks.append((f"after a --pmc session (exit {r.returncode})", time.clock_gettime_ns(BOOT), rss_threads(p.pid)))
    time.sleep(8.0)
    ends.append(time.clock_gettime_ns(BOOT))
    what = soak_session(p.pid, 0, False, ["--kernel-trace"], "/tmp/prp")[0]
    time.sleep(1.0)
    marks.append((f"after a --kernel-trace session ({what})", time.clock_gettime_ns(BOOT), rss_threads(p.pid)))
    time.sleep(8.0)
    ends.append(time.clock_gettime_ns(BOOT))
    p.kill()
    say_marks("/tmp/rp.log", marks, ends)


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
    if "top" in which:
        phase_top()
    if "topddp" in which:
        phase_top_ddp()
    if "soak" in which:
        phase_soak()
    if "residue" in which:
        phase_residue()
    if "residue_pmc" in which:
        phase_residue_pmc()
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
    if "topspm" in which:
        sys.path.insert(0, K)
        import proof_counters
        import proof_spm
        proof_spm.phase_top_spm(K, say, start, steps_of, proof_counters.blocked)
    open(os.path.join(OUT, "cuda_proof.md"), "w").write("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
