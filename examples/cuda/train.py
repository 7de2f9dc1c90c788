"""A plain PyTorch training loop for the CUDA backend's proof (docs/cuda.md, "Measured").

Started with no environment change and no profiler opt-in. It logs every step to --log as
`step <i> <start_ns> <end_ns> <loss>` (CLOCK_BOOTTIME, the clock of our databases) and prints
`ready <pid>` once warm. Each step ends with `loss.item()`, so a step's kernels finish inside it.

  --model mlp          3-layer MLP, ~1 ms steps, a few dozen kernels per step
  --model transformer  12-layer encoder, bf16, tens of ms per step, ~1000 kernels per step
  --model many         500 tiny elementwise kernels per step (to fill a window with 1 M records)
  --torch-profile A:B  trace steps A..B-1 with torch.profiler (CUDA activity) into --trace
  --torch-windows ON:OFF  alternate torch.profiler windows of ON s with OFF s gaps (overhead)
  --floor-windows ON:OFF  the same windows with bare CUPTI kernel tracing (libcupti_floor.so
                       beside this file, built from cupti_floor.c): the floor of any CUPTI tracer
  --end HOW            how the process ends after its steps (exit_check.py): return (default),
                       sys_exit, exception, sigterm, sigint, os_exit, abort, sigkill
"""
import argparse
import ctypes
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402

BOOT = time.CLOCK_BOOTTIME


def model_of(name):
    if name == "mlp":
        m = torch.nn.Sequential(
            torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
            torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
            torch.nn.Linear(1024, 10))
        return m, lambda: (torch.randn(256, 1024, device="cuda"), torch.randint(0, 10, (256,), device="cuda"))
    if name == "transformer":
        layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, dropout=0.0)
        m = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, 12), torch.nn.Flatten(1), torch.nn.LazyLinear(10))
        return m, lambda: (torch.randn(8, 256, 1024, device="cuda"), torch.randint(0, 10, (8,), device="cuda"))
    if name == "many":
        class Many(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(256, 10)

            def forward(self, x):
                for _ in range(250):
                    x = x * 1.0001 + 0.0001
                return self.lin(x)
        return Many(), lambda: (torch.randn(64, 256, device="cuda"), torch.randint(0, 10, (64,), device="cuda"))
    raise SystemExit(f"unknown model {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--steps", type=int, default=0, help="0: until --seconds pass")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log", required=True)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--torch-profile", default="")
    ap.add_argument("--torch-windows", default="")
    ap.add_argument("--floor-windows", default="")
    ap.add_argument("--trace", default="/tmp/torch_trace.json")
    ap.add_argument("--end", default="return")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    model, batch = model_of(a.model)
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    lossf = torch.nn.CrossEntropyLoss()
    # The data is drawn once per step from the seeded generator: the same in every run.
    log = open(a.log, "w", buffering=1)
    prof_range = tuple(int(x) for x in a.torch_profile.split(":")) if a.torch_profile else None
    spec = a.torch_windows or a.floor_windows
    windows = tuple(float(x) for x in spec.split(":")) if spec else None
    floor = None
    if a.floor_windows:
        # libcupti as torch would load it (from the nvidia wheel), if torch has not mapped it yet.
        import glob
        for d in sys.path:
            hits = sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcupti.so.1*")))
            if hits and "CUPTI_PATH" not in os.environ:
                os.environ["CUPTI_PATH"] = hits[-1]
        floor = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), "libcupti_floor.so"))
        floor.floor_records.restype = ctypes.c_uint64
    prof = None
    win_start = None
    t_end = time.monotonic() + a.seconds
    i = 0
    while (a.steps and i < a.steps) or (not a.steps and time.monotonic() < t_end):
        if i == a.warmup:
            print(f"ready {os.getpid()}", flush=True)
        if prof_range and i == prof_range[0]:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            prof.start()
        if windows and i >= a.warmup:
            now = time.monotonic()
            if win_start is None:
                win_start = now
            on = ((now - win_start) % (windows[0] + windows[1])) < windows[0]
            if floor is not None:
                if on and prof is None:
                    r = floor.floor_on()
                    if r != 0:
                        sys.exit(f"floor_on failed: {r}")
                    prof = "floor"
                    log.write(f"floor on {time.clock_gettime_ns(BOOT)}\n")
                elif not on and prof is not None:
                    log.write(f"floor stop {time.clock_gettime_ns(BOOT)}\n")
                    floor.floor_off()
                    prof = None
                    log.write(f"floor off {time.clock_gettime_ns(BOOT)} {floor.floor_records()}\n")
            elif on and prof is None:
                prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
                prof.start()
                log.write(f"torch on {time.clock_gettime_ns(BOOT)}\n")
            elif not on and prof is not None:
                log.write(f"torch stop {time.clock_gettime_ns(BOOT)}\n")
                prof.stop()
                prof = None
                log.write(f"torch off {time.clock_gettime_ns(BOOT)}\n")
        t0 = time.clock_gettime_ns(BOOT)
        x, y = batch()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.model == "transformer"):
            loss = lossf(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        v = loss.item()
        t1 = time.clock_gettime_ns(BOOT)
        log.write(f"step {i} {t0} {t1} {v!r}\n")
        i += 1
        if prof_range and i == prof_range[1]:
            torch.cuda.synchronize()
            prof.stop()
            prof.export_chrome_trace(a.trace)
            prof = None
    if prof == "floor":
        floor.floor_off()
    elif prof is not None:
        prof.stop()
    log.close()
    print("done", flush=True)
    end(a.end)


def end(how):
    """Ends the process as `how` says (after the last step's line is logged)."""
    import signal
    if how == "sys_exit":
        sys.exit(3)
    if how == "exception":
        raise RuntimeError("the end of the loop, uncaught")
    if how in ("sigterm", "sigint", "sigkill"):
        os.kill(os.getpid(), getattr(signal, how.upper()))
        time.sleep(10)  # SIGINT: KeyboardInterrupt is raised here
    if how == "os_exit":
        os._exit(3)
    if how == "abort":
        os.abort()


if __name__ == "__main__":
    sys.exit(main())
