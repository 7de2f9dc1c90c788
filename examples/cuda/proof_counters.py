"""The counters proof (issue 27, docs/cuda.md "Counters"), phases of examples/cuda/proof.py:

  pmc      : counters blocked? (ncu first); a CUDA C program of known grids (grids.cu, built
             with nvcc here): warps launched of every counted dispatch against
             blocks x ceil(threads/32); elapsed and active cycles against ncu's for the same
             kernels (a separate run); command start to the first value; a second session
             (reuse); 100 attach/detach cycles with --pmc: deaths, failed sessions, step time
             after the cycles against before (nothing left serialising); -L (list the metrics)
             on a fresh process, with --json, during a session, and a session after it
  pmctorch : the 12-layer transformer attached with --pmc twice: loss curve against an
             unattached run, the stall of each session (longest step while attached against
             p50), kernel names counted, the cost reported

Each phase checks `ncu` first and stops with one clear line when counters are blocked (a gVisor
machine: LibraryNotLoaded; a driver restricting profiling: ERR_NVGPUCTRPERM). Each stays under
about 4 minutes.
"""
import csv
import io
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time

BOOT = time.CLOCK_BOOTTIME
METRICS = ["sm__warps_launched.sum", "gpc__cycles_elapsed.max", "sm__cycles_active.avg"]
WARPS = {"k_wide": 4096 * 8, "k_odd": 1000 * 4, "k_big_blocks": 37 * 32, "k_3d": 256 * 6}


def blocked(say, probe):
    """None when ncu reads counters on `probe` (a command), else why not (said once)."""
    if not shutil.which("ncu"):
        say("- **COUNTERS NOT CHECKED: no `ncu` on PATH** (the phase goes on; a refusal will say why)")
        return None
    try:
        r = subprocess.run(["ncu", "--metrics", "sm__warps_launched.sum", "--launch-count", "1", *probe],
                           capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        return "ncu did not finish within 180 s"
    text = r.stdout + r.stderr
    for sign in ("LibraryNotLoaded", "ERR_NVGPUCTRPERM", "==ERROR=="):
        if sign in text:
            line = next((l for l in text.splitlines() if sign in l), sign)
            return f"ncu cannot read counters here ({sign}): {line.strip()[:300]}"
    if "sm__warps_launched.sum" not in text:
        return f"ncu printed no counter (exit {r.returncode}): {text.strip()[-300:]}"
    return None


def build_grids(K, say):
    exe = "/tmp/grids"
    r = subprocess.run(["nvcc", "-O2", "-o", exe, os.path.join(K, "grids.cu")], capture_output=True, text=True)
    if r.returncode != 0:
        say(f"- nvcc failed: {r.stderr.strip()[-400:]}")
        return None
    return exe


def ncu_reference(exe):
    """Median of each metric per kernel under ncu (a separate run, 10 launches of each)."""
    try:
        r = subprocess.run(["ncu", "--clock-control", "none", "--metrics", ",".join(METRICS), "--csv",
                            "--launch-count", "40", exe, "--steps", "12", "--log", "/dev/null"],
                           capture_output=True, text=True, timeout=200)
    except subprocess.TimeoutExpired:
        return {}
    rows = [l for l in r.stdout.splitlines() if l.startswith('"')]
    vals = {}
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        name = re.sub(r"\(.*", "", row.get("Kernel Name", "")).strip().split()[-1] if row.get("Kernel Name") else "?"
        try:
            v = float(row["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
        vals.setdefault((name, row.get("Metric Name")), []).append(v)
    return {k: statistics.median(v) for k, v in vals.items()}


def steps(log):
    out = []
    for line in open(log):
        f = line.split()
        if f and f[0] == "step":
            out.append((int(f[1]), int(f[2]), int(f[3])))
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def counter_rows(db):
    c = sqlite3.connect(db)
    return c.execute("SELECT kernel_name, counter_name, value, grid_size, workgroup_size, start "
                     "FROM counters_collection").fetchall()


def short(name):
    return re.sub(r"\(.*", "", name).strip().split()[-1]


def check_grids(say, db, ref):
    rows = counter_rows(db)
    warps = [r for r in rows if r[1] == "sm__warps_launched.sum"]
    exact = [r for r in warps if r[2] == (r[3] // r[4]) * -(-r[4] // 32)]
    known = [r for r in warps if WARPS.get(short(r[0])) == r[2]]
    say(f"- warps launched: **{len(exact)} of {len(warps)} counted dispatches exact** "
        f"(blocks x ceil(threads/32)); {len(known)} equal the program's own figure")
    for m in METRICS[1:]:
        for k in sorted(WARPS):
            ours = [r[2] for r in rows if r[1] == m and short(r[0]) == k]
            theirs = ref.get((k, m))
            if ours and theirs:
                d = (statistics.median(ours) / theirs - 1) * 100
                say(f"  - {k} {m}: ours {statistics.median(ours):.0f} (median of {len(ours)}), "
                    f"ncu {theirs:.0f}: **{d:+.1f} %**")
            else:
                say(f"  - {k} {m}: ours {len(ours)} values, ncu {theirs}")
    return rows


# The rocprofv3 names docs/cuda.md maps, and their NVIDIA metrics (crates/cuda-tool/src/metrics.rs).
MAPPED = {"SQ_WAVES": "sm__warps_launched.sum", "GRBM_COUNT": "gpc__cycles_elapsed.max",
          "GRBM_GUI_ACTIVE": "gr__cycles_active.avg", "SQ_INSTS_SALU": "smsp__inst_executed_pipe_uniform.sum",
          "TCC_HIT": "lts__t_sectors_lookup_hit.sum", "TCC_MISS": "lts__t_sectors_lookup_miss.sum",
          "FETCH_SIZE": "dram__bytes_read.sum", "WRITE_SIZE": "dram__bytes_write.sum"}


def check_names(K, say, pid):
    """Every NVIDIA metric of the names table exists on this GPU (ncu --query-metrics), and
    the rocprofv3 names collect (or are refused naming the passes)."""
    try:
        r = subprocess.run(["ncu", "--query-metrics"], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        r = subprocess.CompletedProcess([], 1, "", "")
    bases = {l.split()[0] for l in r.stdout.splitlines() if l.strip() and "__" in l.split()[0]}
    for rocm, nv in MAPPED.items():
        base = nv.rsplit(".", 1)[0]
        say(f"  - {rocm} -> {nv}: {'known to ncu' if base in bases else '**NOT LISTED by ncu --query-metrics**'}")
    t0, r = attach(K, pid, 1000, ["--pmc", *MAPPED], "/tmp/pcn", "names")
    lines = summary_lines(r) or r.stderr.strip().splitlines()[-2:]
    say(f"- `--pmc {' '.join(MAPPED)}`: exit {r.returncode}: {' / '.join(lines)[:700]}")
    for group in (["SQ_WAVES", "GRBM_COUNT", "GRBM_GUI_ACTIVE", "SQ_INSTS_SALU"],
                  ["TCC_HIT", "TCC_MISS"], ["FETCH_SIZE", "WRITE_SIZE"]):
        t0, r = attach(K, pid, 500, ["--pmc", *group], "/tmp/pcn", "g_" + group[0])
        say(f"  - `--pmc {' '.join(group)}`: exit {r.returncode} {(' / '.join(summary_lines(r)) or r.stderr.strip()[-300:])[:400]}")


def check_list_avail(K, say, exe):
    """`-L -p PID` on a fresh process of grids.cu (no session, tool not loaded): exit code, time,
    metrics per type, the names table's NVIDIA metrics among them and against ncu
    --query-metrics, `--json`; -L while a --pmc session runs (refused); a --pmc session after it;
    the step time before and after (nothing left enabled or slower)."""
    import json
    say("- `-L` (list the metrics) on a fresh process of grids.cu:")
    log = "/tmp/grids_l.log"
    p = subprocess.Popen([exe, "--seconds", "120", "--log", log], stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    time.sleep(2)
    before = [(b - a) / 1e6 for _, a, b in steps(log)[-200:]]
    rpa = os.path.join(K, "rocprof-attach")
    c0 = time.monotonic()
    r = subprocess.run([rpa, "-L", "-p", str(p.pid)], capture_output=True, text=True, timeout=180)
    took = time.monotonic() - c0
    say(f"  - `-L -p PID` (tool not loaded): exit {r.returncode} in {took:.2f} s; "
        f"{len(r.stdout.splitlines())} lines; stderr: {r.stderr.strip()[-300:]}")
    for l in r.stdout.splitlines()[:3] + [l for l in r.stdout.splitlines() if "SQ_WAVES" in l or "FETCH_SIZE" in l]:
        say(f"    `{l[:160]}`")
    c0 = time.monotonic()
    j = subprocess.run([rpa, "--list-avail", "-p", str(p.pid), "--json"], capture_output=True, text=True, timeout=180)
    took = time.monotonic() - c0
    try:
        doc = json.loads(j.stdout)
    except ValueError:
        doc = {}
    say(f"  - `--list-avail --json` (tool loaded): exit {j.returncode} in {took:.2f} s; cupti "
        f"{doc.get('cupti')} version {doc.get('cupti_version')}; notes {doc.get('notes')}; error {doc.get('error')}")
    names = set()
    for chip in doc.get("chips", []):
        kinds = {}
        for m in chip.get("metrics", []):
            kinds[m["type"]] = kinds.get(m["type"], 0) + 1
            names.add(m["name"])
        described = sum(1 for m in chip["metrics"] if m.get("description"))
        say(f"    - chip {chip['chip']} devices {chip['devices']} availability {chip['availability']}: "
            f"{kinds}; {described} with a description")
    for rocm, nv in MAPPED.items():
        base = nv.rsplit(".", 1)[0]
        say(f"    - {rocm} -> {nv}: {'listed' if base in names or nv in names else '**NOT LISTED**'}")
    try:
        q = subprocess.run(["ncu", "--query-metrics"], capture_output=True, text=True, timeout=120)
        ncu = {l.split()[0] for l in q.stdout.splitlines() if l.strip() and "__" in l.split()[0]}
    except (OSError, subprocess.TimeoutExpired):
        ncu = set()
    if ncu:
        say(f"    - against `ncu --query-metrics`: {len(ncu)} there, {len(names)} here, {len(ncu & names)} in both; "
            f"ncu only (first 10): {sorted(ncu - names)[:10]}; here only (first 10): {sorted(names - ncu)[:10]}")
    s = subprocess.Popen([rpa, "-p", str(p.pid), "--pmc", "SQ_WAVES", "-d", "/tmp/pcl", "-o", "during",
                          "--attach-duration-msec", "4000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2)
    d = subprocess.run([rpa, "-L", "-p", str(p.pid)], capture_output=True, text=True, timeout=180)
    say(f"  - `-L` during a --pmc session: exit {d.returncode}: {d.stderr.strip()[-300:]}")
    s.communicate(timeout=120)
    say(f"  - that --pmc session: exit {s.returncode}")
    t0, a = attach(K, p.pid, 1000, ["--pmc", "SQ_WAVES"], "/tmp/pcl", "after")
    say(f"  - a --pmc session after -L: exit {a.returncode}; " + "; ".join(summary_lines(a))[:300])
    time.sleep(2)
    after = [(b - a_) / 1e6 for _, a_, b in steps(log)[-200:]] if p.poll() is None else []
    say(f"  - process alive: {p.poll() is None}; step time p50 before -L {pct(before, .5):.3f} ms, "
        f"after everything {pct(after, .5):.3f} ms")
    p.kill()


def attach(K, pid, ms, opts, outdir, name):
    t0 = time.clock_gettime_ns(BOOT)
    r = subprocess.run([os.path.join(K, "rocprof-attach"), "-p", str(pid), *opts, "-d", outdir, "-o", name,
                        "--attach-duration-msec", str(ms)], capture_output=True, text=True)
    return t0, r


def summary_lines(r):
    return [l.split("warning: ")[-1] for l in r.stderr.splitlines() if "counters" in l]


def phase_pmc(K, say):
    say("\n## pmc: a CUDA C program of known grids (grids.cu)")
    exe = build_grids(K, say)
    if not exe:
        return
    why = blocked(say, [exe, "--steps", "2", "--log", "/dev/null"])
    if why:
        say(f"- **COUNTERS BLOCKED ON THIS MACHINE: {why}** (phase skipped)")
        return
    ref = ncu_reference(exe) if shutil.which("ncu") else {}
    shutil.rmtree("/tmp/pc", ignore_errors=True)
    p = subprocess.Popen([exe, "--seconds", "200", "--log", "/tmp/grids.log"], stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    time.sleep(2)
    t0, r = attach(K, p.pid, 2000, ["--pmc", *METRICS, "--output-format", "csv,rocpd"], "/tmp/pc", "g")
    say(f"- `--pmc {' '.join(METRICS)}` (first session in the process): exit {r.returncode}")
    for l in summary_lines(r) or r.stderr.strip().splitlines()[-4:]:
        say(f"  - {l}")
    db = "/tmp/pc/g_results.db"
    if os.path.exists(db):
        rows = check_grids(say, db, ref)
        first = min((x[5] for x in rows), default=None)
        if first:
            say(f"- command start to the first counted kernel: **{(first - t0) / 1e6:.0f} ms**")
        say(f"- counter_collection.csv written: {os.path.exists('/tmp/pc/g_counter_collection.csv')}")
    t0, r = attach(K, p.pid, 1000, ["--pmc", *METRICS], "/tmp/pc", "g2")
    say(f"- second session, same metrics: exit {r.returncode}; " + "; ".join(summary_lines(r))[:600])
    db2 = "/tmp/pc/g2_results.db"
    if os.path.exists(db2):
        check_grids(say, db2, {})
    say("- the names table on this GPU:")
    check_names(K, say, p.pid)
    before = [(b - a) / 1e6 for _, a, b in steps("/tmp/grids.log")[-200:]]
    fails, deaths = 0, 0
    c0 = time.monotonic()
    for c in range(100):
        _, r = attach(K, p.pid, 100, ["--pmc", "sm__warps_launched.sum"], "/tmp/pcy", f"y{c}")
        fails += r.returncode != 0
        if p.poll() is not None:
            deaths = 1
            break
        if c == 0 and r.returncode != 0:
            say(f"  - first cycle failed: {r.stderr.strip()[-300:]}")
    took = time.monotonic() - c0
    time.sleep(2)
    after = [(b - a) / 1e6 for _, a, b in steps("/tmp/grids.log")[-200:]] if deaths == 0 else []
    say(f"- 100 attach/detach cycles with --pmc: deaths {deaths}, failed sessions {fails}, {took:.0f} s")
    say(f"- step time p50 before the cycles {pct(before, .5):.3f} ms, 2 s after the last: "
        f"{pct(after, .5):.3f} ms (nothing left serialising if equal within noise)")
    p.kill()
    check_list_avail(K, say, exe)


def phase_pmctorch(K, say, start, steps_of):
    say("\n## pmctorch: the 12-layer transformer with --pmc")
    why = blocked(say, [sys.executable, os.path.join(K, "train.py"), "--model", "mlp", "--steps", "40",
                        "--warmup", "2", "--log", "/dev/null"])
    if why:
        say(f"- **COUNTERS BLOCKED ON THIS MACHINE: {why}** (phase skipped)")
        return
    p = start("transformer", "/tmp/t0.log", steps=400, extra=["--seed", "7"])
    p.wait()
    shutil.rmtree("/tmp/pt", ignore_errors=True)
    b = start("transformer", "/tmp/t1.log", steps=400, extra=["--seed", "7"])
    time.sleep(3)
    t0a, r1 = attach(K, b.pid, 3000, ["--pmc", "SQ_WAVES", "GRBM_COUNT"], "/tmp/pt", "a")
    t0b, r2 = attach(K, b.pid, 3000, ["--pmc", "SQ_WAVES", "GRBM_COUNT"], "/tmp/pt", "b")
    b.wait()
    la = [s[3] for s in steps_of("/tmp/t0.log")]
    lb = [s[3] for s in steps_of("/tmp/t1.log")]
    say(f"- loss curves of {len(la)} steps equal (unattached vs attached twice): **{la == lb}**")
    st = steps_of("/tmp/t1.log")
    durs = [(s[2] - s[1]) / 1e6 for s in st]
    p50 = pct(durs, .5)
    for label, t0, r in (("first", t0a, r1), ("second", t0b, r2)):
        inside = [(s[2] - s[1]) / 1e6 for s in st if t0 <= s[1] <= t0 + 4_000_000_000]
        say(f"- {label} session: exit {r.returncode}; longest step while attached {max(inside, default=0):.0f} ms "
            f"(p50 of the run {p50:.1f} ms): stall about {max(inside, default=0) - p50:.0f} ms")
        for l in summary_lines(r):
            say(f"  - {l}")
    for n in ("a", "b"):
        db = f"/tmp/pt/{n}_results.db"
        if os.path.exists(db):
            names = sqlite3.connect(db).execute("SELECT COUNT(DISTINCT kernel_name), COUNT(*) FROM counters_collection").fetchone()
            say(f"- {n}: {names[0]} kernel names with values, {names[1]} values")
