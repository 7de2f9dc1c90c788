#!/usr/bin/env bash
# The plan step (select, trees, preflight) of one session over N stand-in targets, with the
# session's own step timings (-vv's debug lines), for one or more rocprof-attach binaries run
# in turn: the many-targets figures of docs/performance.md. Needs a kit from
# `examples/bench_kit.sh prepare KIT` (its fixtures) and runs as root.
#
#   bash examples/bench_plan.sh KIT [BINARY...]      # default: KIT/rocprof-attach
#   N=128 RUNS=6 bash examples/bench_plan.sh KIT old/rocprof-attach KIT/rocprof-attach
set -u
K=$(cd "${1:?usage: bench_plan.sh KIT [BINARY...]}" && pwd); shift
[ $# -gt 0 ] || set -- "$K/rocprof-attach"
N=${N:-128}; RUNS=${RUNS:-6}; F=$K/fixtures; W=$(mktemp -d)
# The targets read stdin until EOF: a FIFO we hold open, so they all exit when this script does.
mkfifo "$W/stdin"; exec 3<>"$W/stdin"
trap 'exec 3>&-; rm -rf "$W"' EXIT
for i in $(seq "$N"); do
  STANDIN_REGISTER_LIB=$F/librocprofiler-register.so.0 ROCPROF_STANDIN_LOG=$W/log.$i \
    ROCP_TOOL_ATTACH=1 "$F/target" --workers 0 --heartbeat "$W/hb.$i" < "$W/stdin" 3<&- > "$W/out.$i" 2>&1 &
done
pids=()
for i in $(seq "$N"); do
  for _ in $(seq 200); do grep -q ready "$W/out.$i" 2>/dev/null && break; sleep 0.05; done
  pids+=("$(awk '/ready/{print $2}' "$W/out.$i")")
done
P=$(IFS=,; echo "${pids[*]}")
echo "$N targets"
for r in $(seq "$RUNS"); do
  for b in "$@"; do
    printf '%s run %s: ' "$b" "$r"
    ROCPROF_ATTACH_LOG="rocprof_attach::attach::session::plan=debug,rocprof_attach::cli::session=debug" \
      "$b" --attach "$P" --kernel-trace -d "$W/o.$r" -t "$F/libstandin-tool.so" \
      --attach-duration-msec 1 --parallel 16 -q 2>&1 | sed 's/\x1b\[[0-9;]*m//g' |
      grep -oE "step plan \(select, preflight\): [0-9.]+ ms, our CPU [0-9.]+ ms" | tr '\n' ' '
    echo
  done
done
