#!/usr/bin/env bash
# The benchmarks of docs/performance.md on a machine without a Rust toolchain or a compiler
# (a GPU machine): build a kit here, copy it there, run it there.
#
#   examples/bench_kit.sh prepare KIT   # here: release binary, bench examples, C stand-ins,
#                                       # the 4 MiB padded register library, the PyTorch target
#   bash KIT/bench_kit.sh run KIT       # there (as root): bench_multi, bench_e2e, bench_inject,
#                                       # then a PyTorch training loop (examples/torch_target.py)
#                                       # with 40 whole sessions and bench_inject against it
#
# Results go to $OUT (default /tmp/out), one Markdown file per benchmark.
set -u
cmd=${1:-}; K=${2:-}
[ -n "$cmd" ] && [ -n "$K" ] || { sed -n 2,12p "$0"; exit 2; }
case "$cmd" in
prepare)
  set -e
  R=$(cd "$(dirname "$0")/.." && pwd)
  mkdir -p "$K/fixtures/pad4"
  (cd "$R" && cargo build --release --bin rocprof-attach --example bench_multi --example bench_e2e --example bench_inject)
  cp "$R"/target/release/rocprof-attach "$R"/target/release/examples/bench_{multi,e2e,inject} "$K/"
  cp "$R/examples/torch_target.py" "$R/examples/bench_kit.sh" "$K/"
  F=$R/tests/fixtures
  cc="gcc -O1 -g -pthread -Wall -I $F"
  $cc -fPIC -shared -Wl,--build-id -Wl,-soname,librocprofiler-register.so.0 \
    -o "$K/fixtures/librocprofiler-register.so.0" "$F/register_standin.c" -ldl
  $cc -o "$K/fixtures/target" "$F/target.c" -ldl
  $cc -fPIC -shared -o "$K/fixtures/libstandin-tool.so" "$F/tool.c" -ldl
  $cc -O2 -o "$K/fixtures/floor" "$F/floor.c"
  head -c $((4 << 20)) /dev/urandom > "$K/fixtures/pad.bin"
  objcopy --add-section .debug_pad="$K/fixtures/pad.bin" --set-section-flags .debug_pad=readonly \
    "$K/fixtures/librocprofiler-register.so.0" "$K/fixtures/pad4/librocprofiler-register.so.0"
  rm "$K/fixtures/pad.bin"
  du -sh "$K"
  ;;
run)
  K=$(cd "$K" && pwd)
  OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
  export ROCPROF_ATTACH_BIN=$K/rocprof-attach ROCPROF_FIXTURES_DIR=$K/fixtures PYTHONUNBUFFERED=1
  { nproc; uname -r; grep -m1 "model name" /proc/cpuinfo; nvidia-smi -L 2>&1 | head -2; } | tee "$OUT/machine.txt"
  echo "== bench_multi"
  BENCH_COUNTS=1,8,32,128 BENCH_PARALLEL=16,64 BENCH_REPS=${BENCH_REPS:-7} timeout 300 "$K/bench_multi" > "$OUT/multi.md" 2>&1
  tail -25 "$OUT/multi.md"
  echo "== bench_e2e"
  BENCH_E2E_RUNS=30 BENCH_E2E_WINDOW_SECS=3 timeout 90 "$K/bench_e2e" > "$OUT/e2e.md" 2>&1
  tail -22 "$OUT/e2e.md"
  echo "== bench_inject (stand-in)"
  BENCH_AGENT_RUNS=500 BENCH_IDLE_SECS=1 timeout 90 "$K/bench_inject" > "$OUT/inject_standin.md" 2>&1
  tail -22 "$OUT/inject_standin.md"
  echo "== PyTorch target"
  (cd /tmp && ROCP_TOOL_ATTACH=1 exec python3 "$K/torch_target.py" \
    --register-lib "$K/fixtures/librocprofiler-register.so.0" --seconds 240 > "$OUT/torch.log" 2>&1) &
  TP=$!
  for _ in $(seq 1 240); do grep -q "^ready" "$OUT/torch.log" && break; kill -0 $TP 2>/dev/null || break; sleep 0.5; done
  head -3 "$OUT/torch.log"
  if grep -q "^ready" "$OUT/torch.log"; then
    PID=$(awk '/^ready/{print $2}' "$OUT/torch.log")
    for _ in $(seq 1 40); do
      "$K/rocprof-attach" -p "$PID" --kernel-trace -d /tmp/torchout -t "$K/fixtures/libstandin-tool.so" \
        --attach-duration-msec 1 2>&1 | grep -o "listener stopped [0-9]* µs"
    done > "$OUT/torch_sessions.txt"
    awk '{print $3}' "$OUT/torch_sessions.txt" | sort -n | awk '{a[NR]=$1} END {print "40 sessions, listener stopped (µs): min", a[1], "p50", a[int(NR/2)+1], "p90", a[int(NR*0.9)+1], "max", a[NR]}'
    BENCH_PID=$PID BENCH_AGENT_RUNS=500 BENCH_IDLE_SECS=1 timeout 120 "$K/bench_inject" > "$OUT/inject_torch.md" 2>&1
    tail -24 "$OUT/inject_torch.md"
  fi
  kill $TP 2>/dev/null; wait $TP 2>/dev/null
  ;;
*) sed -n 2,12p "$0"; exit 2 ;;
esac
