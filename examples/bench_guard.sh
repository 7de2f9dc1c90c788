#!/usr/bin/env bash
# The guard of docs/performance.md ("What each round adds to a session"): whole sessions
# (attach, a 1 ms window, detach) of several rocprof-attach binaries on stand-in targets, one
# target per binary (a reattach must ask for what the first attach did), counted three ways:
#
#  * instructions (callgrind, user space, the front end and its agent server summed): the same
#    on a loaded machine as on an idle one, so builds of two commits compare exactly;
#  * system calls (strace -f -c) of one session;
#  * wall and CPU time of RUNS sessions per binary, interleaved (A B B A ...), and the target's
#    time inside the attach and detach calls as the stand-in logs it (ns=).
#
# Each binary gets a warm-up session first, so the counted ones are reattaches (the common case
# of a service profiled again and again). Needs valgrind, strace, python3, root (or
# CAP_SYS_PTRACE), and the stand-ins built by the tests (target/tmp/fixtures) or a kit from
# `examples/bench_kit.sh prepare KIT`.
#
#   bash examples/bench_guard.sh OLD/rocprof-attach NEW/rocprof-attach
#   RUNS=60 FIXTURES=KIT/fixtures bash examples/bench_guard.sh A B C
#   KEEP=DIR bash examples/bench_guard.sh A B   # keeps DIR/cgN.PID (callgrind, one file per
#     process: `callgrind_annotate --inclusive=yes FILE`) and DIR/stN.txt (strace -c) of binary N
set -u
[ $# -gt 0 ] || { echo "usage: bench_guard.sh BINARY..." >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
F=${FIXTURES:-$here/target/tmp/fixtures}
pick() { ls "$F"/$1 "$F"/*/$1 2>/dev/null | head -1; }
T=$(pick target); REG=$(pick librocprofiler-register.so.0); TOOL=$(pick libstandin-tool.so)
[ -n "$T" ] && [ -n "$REG" ] && [ -n "$TOOL" ] || { echo "no stand-ins under $F: run the tests once" >&2; exit 2; }
RUNS=${RUNS:-30}; W=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
start_target() { # $1: name -> prints its pid once its listener runs
  STANDIN_REGISTER_LIB=$REG ROCPROF_STANDIN_LOG=$W/$1.log ROCP_TOOL_ATTACH=1 \
    "$T" --workers 2 --heartbeat "$W/$1.hb" < /dev/zero > "$W/$1.out" 2>&1 &
  local p=$!
  for _ in $(seq 200); do grep -qs rocp-bg-attach /proc/$p/task/*/comm && break; sleep 0.05; done
  echo $p
}
session() { # $1 binary, $2 pid, $3 output dir, then a wrapper command
  local b=$1 p=$2 d=$3; shift 3
  env -u ROCP_TOOL_ATTACH "$@" "$b" -p "$p" --kernel-trace --attach-duration-msec 1 -q -d "$d" -t "$TOOL" > /dev/null
}
i=0
for b in "$@"; do
  i=$((i + 1)); p=$(start_target cg$i)
  session "$b" "$p" "$W/warm$i"
  session "$b" "$p" "$W/cg$i" valgrind --tool=callgrind --callgrind-out-file="$W/cg$i.%p" 2> /dev/null
  ir=$(cat "$W"/cg$i.* | awk '/^summary:/{s += $2} END {print s}')
  session "$b" "$p" "$W/st$i" strace -f -c -o "$W/st$i.txt"
  calls=$(awk '/total$/{print $4}' "$W/st$i.txt")
  printf '%s: %s instructions, %s system calls per session\n' "$b" "$ir" "$calls"
  [ -z "${KEEP:-}" ] || { mkdir -p "$KEEP" && cp "$W"/cg$i.* "$W/st$i.txt" "$KEEP"/; }
done
python3 - "$RUNS" "$T" "$REG" "$TOOL" "$W" "$@" <<'EOF'
import os, re, resource, statistics, subprocess, sys, time
runs, target, reg, tool, work, bins = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
env = dict(os.environ, STANDIN_REGISTER_LIB=reg, ROCP_TOOL_ATTACH="1")
procs = []
for i, _ in enumerate(bins):
    e = dict(env, ROCPROF_STANDIN_LOG="%s/t%d.log" % (work, i))
    p = subprocess.Popen([target, "--workers", "2", "--heartbeat", "%s/t%d.hb" % (work, i)], env=e,
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    for _ in range(200):
        tasks = "/proc/%d/task" % p.pid
        if any(open("%s/%s/comm" % (tasks, t)).read().strip() == "rocp-bg-attach" for t in os.listdir(tasks)):
            break
        time.sleep(0.05)
    procs.append(p)
clean = {k: v for k, v in os.environ.items() if not k.startswith("ROCP")}
wall, cpu = [[] for _ in bins], [[] for _ in bins]
for r in range(runs + 1):
    order = list(range(len(bins))) if r % 2 == 0 else list(range(len(bins)))[::-1]
    for i in order:
        u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([bins[i], "-p", str(procs[i].pid), "--kernel-trace", "--attach-duration-msec", "1", "-q",
                        "-d", "%s/o%d/%d" % (work, i, r), "-t", tool], env=clean, check=True,
                       stdout=subprocess.DEVNULL)
        t1 = time.perf_counter()
        u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r > 0:  # the first round is a warm-up
            wall[i].append((t1 - t0) * 1e3)
            cpu[i].append((u1.ru_utime - u0.ru_utime + u1.ru_stime - u0.ru_stime) * 1e3)
for p in procs:
    p.kill()
for i, b in enumerate(bins):
    calls = {"attach": [], "detach": []}
    for line in open("%s/t%d.log" % (work, i)):
        calls[line.split()[0]].append(int(re.search(r" ns=(\d+)", line).group(1)) / 1e3)
    print("%s: wall %.2f ms (p10 %.2f, p90 %.2f), CPU %.2f ms, target in attach %.0f us, in detach %.0f us (%d sessions)" % (
        b, statistics.median(wall[i]), sorted(wall[i])[len(wall[i]) // 10], sorted(wall[i])[9 * len(wall[i]) // 10],
        statistics.median(cpu[i]), statistics.median(calls["attach"]), statistics.median(calls["detach"]), runs))
EOF
