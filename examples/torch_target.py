#!/usr/bin/env python3
"""A small multi-threaded PyTorch training loop that opts in to attachment (benchmark target).

It loads the GPU-free stand-in librocprofiler-register (tests/fixtures/register_standin.c) and
registers a runtime the way HIP does at start-up, so with ROCP_TOOL_ATTACH=1 the library starts its
'rocp-bg-attach' listener thread; then it trains a small CNN on random data, on the GPU when
PyTorch sees one (CUDA or ROCm), with a Python thread producing batches and PyTorch's own
intra-op and driver threads, until killed or --seconds have passed. It prints 'ready <pid>
threads=<n> mappings=<n>' once the listener runs.

    ROCP_TOOL_ATTACH=1 python3 examples/torch_target.py \
        --register-lib target/tmp/fixtures/<hash>/librocprofiler-register.so.0
    # or preload the stand-in: LD_PRELOAD=.../librocprofiler-register.so.0 ROCP_TOOL_ATTACH=1 ...

Then attach: rocprof-attach -p <pid> -t <stand-in tool> --attach-duration-msec 1000, or measure
the listener's stop with BENCH_PID=<pid> cargo run --release --example bench_inject
(docs/performance.md, "Listener stop").
"""

import argparse
import ctypes
import os
import queue
import sys
import threading
import time


def start_listener(lib_path):
    """Register a "hip" runtime with the stand-in, which starts the listener thread."""
    lib = ctypes.CDLL(lib_path, mode=ctypes.RTLD_GLOBAL)
    register = lib.rocprofiler_register_library_api_table
    register.argtypes = [
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_void_p,
    ]
    register.restype = ctypes.c_int
    if register(b"hip", None, 0, None, 0, None) != 0:
        sys.exit("torch_target: rocprofiler_register_library_api_table failed")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    if f.read().strip() == "rocp-bg-attach":
                        return int(tid)
            except OSError:
                pass
        time.sleep(0.01)
    sys.exit("torch_target: no rocp-bg-attach thread (is ROCP_TOOL_ATTACH=1 set?)")


def producer(batches, stop, device, batch):
    """Make batches on the CPU (another busy thread, like a data loader) and queue them."""
    import torch

    while not stop.is_set():
        x = torch.randn(batch, 3, 32, 32)
        y = torch.randint(0, 10, (batch,))
        if device != "cpu":
            x = x.pin_memory()
        try:
            batches.put((x, y), timeout=0.5)
        except queue.Full:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--register-lib", default=os.environ.get("STANDIN_REGISTER_LIB",
                                                             "librocprofiler-register.so.0"))
    ap.add_argument("--seconds", type=float, default=3600.0)
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args()

    listener = start_listener(args.register_lib)

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = queue.Queue(maxsize=8)
    stop = threading.Event()
    threads = [threading.Thread(target=producer, args=(batches, stop, device, args.batch),
                                daemon=True, name=f"producer-{i}") for i in range(2)]
    for t in threads:
        t.start()

    # A few steps first, so CUDA, cuDNN and the thread pools are up before we say ready.
    step = 0
    end = time.monotonic() + args.seconds
    announced = False
    while time.monotonic() < end:
        x, y = batches.get()
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step == 20 and not announced:
            if device != "cpu":
                torch.cuda.synchronize()
            nthreads = len(os.listdir("/proc/self/task"))
            with open("/proc/self/maps") as f:
                nmaps = sum(1 for _ in f)
            print(f"ready {os.getpid()} listener={listener} threads={nthreads} mappings={nmaps} "
                  f"device={device}", flush=True)
            announced = True
        if step % 500 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    stop.set()


if __name__ == "__main__":
    main()
