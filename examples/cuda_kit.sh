#!/usr/bin/env bash
# The CUDA backend's proof on a GPU machine without a Rust toolchain (docs/cuda.md, "Measured").
#
#   examples/cuda_kit.sh prepare KIT     # here: release rocprof-attach, the CUDA tool library,
#                                        # the training loop and the proof driver
#   bash KIT/cuda_kit.sh run KIT [PHASE...]   # there: phases same torch transformer overhead
#                                        # cycles million ddp top topddp soak pmc pmctorch spm topspm
#                                        # (default: all but transformer, ddp, top, topddp, soak,
#                                        # pmc, pmctorch, spm, topspm; ddp and topddp need 2 GPUs; soak runs
#                                        # SOAK_MINUTES=10; pmc, pmctorch, spm, topspm need counters:
#                                        # they check ncu first)
#   python3 KIT/exit_check.py            # there: a loop ending by each route mid-window
#
# Results go to $OUT (default /tmp/out)/cuda_proof.md.
set -u
cmd=${1:-}; K=${2:-}
[ -n "$cmd" ] && [ -n "$K" ] || { sed -n 2,13p "$0"; exit 2; }
case "$cmd" in
prepare)
  set -e
  R=$(cd "$(dirname "$0")/.." && pwd)
  mkdir -p "$K"
  (cd "$R" && ROCPROF_ATTACH_OTF2=${ROCPROF_ATTACH_OTF2:-off} cargo build --release -p rocprof-attach -p rocprof-cuda-tool)
  cp "$R/target/release/rocprof-attach" "$R/target/release/librocprof_cuda_tool.so" "$K/"
  gcc -O2 -shared -fPIC -o "$K/libcupti_floor.so" "$R/examples/cuda/cupti_floor.c" -ldl
  cp "$R/examples/cuda/train.py" "$R/examples/cuda/ddp.py" "$R/examples/cuda/proof.py" \
     "$R/examples/cuda/proof_counters.py" "$R/examples/cuda/proof_spm.py" "$R/examples/cuda/proof_mplex.py" "$R/examples/cuda/probe_mp.cu" "$R/examples/cuda/grids.cu" "$R/examples/cuda_kit.sh" \
     "$R/examples/cuda/exit_check.py" "$R/examples/cuda/spm_debug.py" "$K/"
  du -sh "$K"
  ;;
run)
  shift 2
  K=$(cd "$K" && pwd)
  export OUT=${OUT:-/tmp/out} PYTHONUNBUFFERED=1
  mkdir -p "$OUT"
  cd /tmp && python3 "$K/proof.py" "$@"
  ;;
*) sed -n 2,13p "$0"; exit 2 ;;
esac
