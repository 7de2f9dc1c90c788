"""Sampled counters (--spm, CUPTI PM sampling) on a GPU: the spm phase of proof.py (docs/cuda.md,
"Sampled counters"), run by examples/cuda_kit.sh (`bash KIT/cuda_kit.sh run KIT spm`).

  spm : checks ncu first; the 12-layer transformer (train.py) for about 2 minutes with
        interleaved on/off --spm windows (3 s on, 3 s off): p50 step time on against off (goal
        <= 2 %); the command's start to the first sample's end (goal <= 500 ms); the SM-activity
        series (sm__cycles_active.avg / gpc__cycles_elapsed.max per sample) against the busy
        fraction of the kernel trace in the same samples; one Perfetto trace with both.
"""
import os
import shutil
import sqlite3
import subprocess
import sys
import time

BOOT = time.CLOCK_BOOTTIME
SPM = ["--spm-beta-enabled", "--spm", "sm__cycles_active.avg", "gpc__cycles_elapsed.max",
       "--spm-sample-interval", "1000"]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def busy_fraction(ks, s, e):
    """Fraction of [s, e) covered by kernels (merged intervals)."""
    cov, cur_s, cur_e = 0, None, None
    for _, a, b in ks:
        if b <= s or a >= e:
            continue
        a, b = max(a, s), min(b, e)
        if cur_e is None or a > cur_e:
            if cur_e is not None:
                cov += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    if cur_e is not None:
        cov += cur_e - cur_s
    return cov / (e - s)


def phase_spm(K, say, start, steps_of, blocked):
    say("\n## spm: the 12-layer transformer with --spm (PM sampling), on/off windows")
    why = blocked(say, [sys.executable, os.path.join(K, "train.py"), "--model", "mlp", "--steps", "40",
                        "--warmup", "2", "--log", "/dev/null"])
    if why:
        say(f"- **COUNTERS BLOCKED ON THIS MACHINE: {why}** (phase skipped)")
        return
    rpa = os.path.join(K, "rocprof-attach")
    shutil.rmtree("/tmp/ps", ignore_errors=True)
    cycles, on_s, off_s = 12, 3.0, 3.0
    p = start("transformer", "/tmp/s.log", seconds=cycles * (on_s + off_s) + 8)
    time.sleep(2.0)
    on, firsts, fails = [], [], 0
    for c in range(cycles):
        t0 = time.clock_gettime_ns(BOOT)
        opts = SPM + (["--kernel-trace"] if c == 0 else [])
        r = subprocess.run([rpa, "-p", str(p.pid), *opts, "-d", "/tmp/ps", "-o", f"s{c}",
                            "--attach-duration-msec", str(int(on_s * 1000))], capture_output=True, text=True)
        if r.returncode != 0:
            fails += 1
            say(f"    session {c}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
            time.sleep(off_s)
            continue
        db = f"/tmp/ps/s{c}_results.db"
        first = sqlite3.connect(db).execute("SELECT MIN(end) FROM rocpd_spm_sample").fetchone()[0]
        if first:
            firsts.append((first - t0) / 1e6)
        on.append((t0 + 300_000_000, t0 + int(on_s * 1e9)))
        time.sleep(off_s)
    p.wait()
    ins, outs = [], []
    for _, a, b, _ in steps_of("/tmp/s.log"):
        d = (b - a) / 1e6
        (ins if any(x <= a and b <= y for x, y in on) else outs).append(d)
    cost = (pct(ins, .5) / pct(outs, .5) - 1) * 100 if ins and outs else float("nan")
    say(f"- {cycles} sessions, {fails} failed; steps on p50 {pct(ins, .5):.3f} ms ({len(ins)}), off p50 "
        f"{pct(outs, .5):.3f} ms ({len(outs)}): **{cost:+.2f} %** at p50 (goal <= 2 %)")
    say(f"- command start to the first sample's end: median **{pct(firsts, .5):.0f} ms**, max "
        f"{max(firsts, default=float('nan')):.0f} ms over {len(firsts)} sessions (goal <= 500 ms)")
    db = "/tmp/ps/s0_results.db"
    if not os.path.exists(db):
        return
    c = sqlite3.connect(db)
    ks = c.execute("SELECT name, start, end FROM kernels ORDER BY start").fetchall()
    rows = c.execute(
        "SELECT A.start, A.end, A.value / E.value FROM rocpd_spm_sample A JOIN rocpd_spm_sample E "
        "ON E.start = A.start AND E.metric = 'gpc__cycles_elapsed.max' "
        "WHERE A.metric = 'sm__cycles_active.avg' ORDER BY A.start").fetchall()
    pairs = [(act, busy_fraction(ks, s, e)) for s, e, act in rows if ks and ks[0][1] <= s and e <= ks[-1][2]]
    gaps = [(a, b) for a, b in pairs if b < 0.5]
    diffs = [abs(a - b) for a, b in pairs]
    say(f"- session 0: {len(rows)} samples of 1 ms, {len(ks)} kernels; SM active vs kernel-trace busy "
        f"fraction per sample: median |diff| {pct(diffs, .5):.3f}, p90 {pct(diffs, .9):.3f}; "
        f"{len(gaps)} samples in trace gaps (busy < 50 %): SM active there median {pct([a for a, _ in gaps], .5):.3f}")
    for s, e, act in rows[:: max(1, len(rows) // 8)][:8]:
        say(f"    sample {s}: SM active {act:.3f}, trace busy {busy_fraction(ks, s, e):.3f}")
    r = subprocess.run([rpa, "convert", "-i", db, "-f", "pftrace", "-d", "/tmp/ps/conv"],
                       capture_output=True, text=True)
    trace = "/tmp/ps/conv/out_results.pftrace"
    ok = r.returncode == 0 and os.path.exists(trace) and b"SPM sm__cycles_active.avg" in open(trace, "rb").read()
    out = os.environ.get("OUT", "/tmp/out")
    if ok:
        shutil.copy(trace, os.path.join(out, "spm_transformer.pftrace"))
    say(f"- Perfetto trace with kernel slices and the SPM counter tracks: **{ok}** (spm_transformer.pftrace)")


def spm_table(lines, start):
    """The `top --batch` spm rows after line `start`: series -> (samples, mean, min, max, last)."""
    out, on = {}, False
    for line in lines[start:]:
        if line.strip().startswith("SAMPLES"):
            on = True
            continue
        if on:
            f = line.split(None, 5)
            if len(f) < 6 or not f[0].isdigit():
                break
            out[f[5]] = tuple(f[:5])
    return out


def phase_top_spm(K, say, start, steps_of, blocked, watch_s=10, off_s=10):
    """`top --spm` on the transformer (issue 28): SM activity per interval against the busy
    percentage of the kernel rows, the final spm table against `summary -f html`'s (the same
    code), top's own CPU, the step time watched against not, and what --spm cost the tool's
    ticks (the detach reply's spm_tick_us, logged at debug level)."""
    say(f"\n## `rocprof-attach top --spm --batch` on the transformer for {watch_s} s (docs/top.md)")
    why = blocked(say, [sys.executable, os.path.join(K, "train.py"), "--model", "mlp", "--steps", "40",
                        "--warmup", "2", "--log", "/dev/null"])
    if why:
        say(f"- **COUNTERS BLOCKED ON THIS MACHINE: {why}** (phase skipped)")
        return
    rpa = os.path.join(K, "rocprof-attach")
    p = start("transformer", "/tmp/topspm.log", seconds=watch_s + off_s + 12)
    time.sleep(2.0)
    shutil.rmtree("/tmp/ptopspm", ignore_errors=True)
    cmd = [rpa, "top", "-p", str(p.pid), "--spm", "--batch", "--interval", "1s", "-n", str(watch_s),
           "-d", "/tmp/ptopspm"]
    env = dict(os.environ, ROCPROF_ATTACH_LOG="debug")
    t0 = time.clock_gettime_ns(BOOT)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    t1 = time.clock_gettime_ns(BOOT)
    out = os.environ.get("OUT", "/tmp/out")
    open(os.path.join(out, "top_spm_batch.txt"), "w").write(r.stdout)
    open(os.path.join(out, "top_spm_stderr.txt"), "w").write(r.stderr)
    lines = r.stdout.split("\n")
    say(f"- `rocprof-attach {' '.join(cmd[1:])}`: exit {r.returncode} in {(t1 - t0) / 1e9:.1f} s")
    cpu = [l for l in lines if "top's own CPU:" in l]
    say(f"- {cpu[-1].replace('note: ', '') if cpu else 'no CPU line'} (interval 1 s, with --spm)")
    ticks = [l.split("DEBUG ")[-1] for l in r.stderr.split("\n") if "--spm wrote" in l]
    say(f"- the tool's ticks: {ticks[-1] if ticks else 'no spm_tick_us line in the debug log'}")
    heads = [i for i, l in enumerate(lines) if l.startswith("rocprof-attach top - interval")]
    say("- per interval: SM active % (mean, min, max) | the kernel rows' BUSY%:")
    for i in heads:
        t = spm_table(lines, i)
        sm = next((v for k, v in t.items() if k.startswith("SM active %")), None)
        busy = lines[i + 2].split()[2] if len(lines) > i + 2 else "?"
        say(f"    {sm[1] if sm else '-'} ({sm[2] if sm else '-'}, {sm[3] if sm else '-'}; {sm[0] if sm else 0} samples) | {busy}")
    fin = next((i for i, l in enumerate(lines) if l.startswith("rocprof-attach top - totals since")), None)
    dbs = sorted(os.path.join(d, f) for d, _, fs in os.walk("/tmp/ptopspm") for f in fs if f.endswith("_results.db"))
    if fin is not None and dbs:
        shutil.rmtree("/tmp/ptopspm_sum", ignore_errors=True)
        subprocess.run([rpa, "summary", "-i", dbs[0], "-f", "html", "-d", "/tmp/ptopspm_sum"],
                       capture_output=True, text=True)
        html = "".join(open(os.path.join("/tmp/ptopspm_sum", n)).read()
                       for n in os.listdir("/tmp/ptopspm_sum") if n.endswith(".html"))
        finals = spm_table(lines, fin)
        same = [name for name, c in finals.items()
                if "<tr>" + "".join(f"<td>{x}</td>" for x in c) + f"<td>{name}</td></tr>" in html]
        twice = sqlite3.connect(dbs[0]).execute(
            "SELECT COUNT(*) FROM (SELECT start, metric FROM rocpd_spm_sample GROUP BY start, metric "
            "HAVING COUNT(*) > 1)").fetchone()[0]
        say(f"- final spm table equal to `summary -f html`'s: **{len(same)} of {len(finals)}** series; "
            f"samples written twice: **{twice}**")
    time.sleep(off_s)
    p.wait()
    ins, outs = [], []
    for _, a, b, _ in steps_of("/tmp/topspm.log"):
        (ins if t0 + 500_000_000 <= a and b <= t1 else outs).append((b - a) / 1e6)
    if ins and outs:
        say(f"- step time while watched with --spm: p50 {pct(ins, .5):.3f} ms ({len(ins)} steps); not "
            f"watched p50 {pct(outs, .5):.3f} ms ({len(outs)}): **{(pct(ins, .5) / pct(outs, .5) - 1) * 100:+.1f} %**")
