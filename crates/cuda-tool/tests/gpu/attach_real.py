"""Manual check of the CUDA tool library on a real GPU (not run by cargo test: it needs a GPU,
PyTorch or CuPy, and the real libcupti).

Usage: python3 attach_real.py TOOL.so OUTDIR MODE
  MODE torch   PyTorch process (libcupti mapped at import by Kineto): attach over the front end's
               socket, work, detach; then a second session over the tool's own socket that ends
               without detach (EOF); a second start returns 1
  MODE kineto  PyTorch with torch.profiler running: attach must answer `error cupti-held`
  MODE cupy    CuPy process (no libcupti mapped): the tool finds and loads CUPTI late
  MODE alloc   CuPy process: memory allocation trace only, around cudaMalloc/cudaFree
  MODE stress  PyTorch, 64 KiB CUPTI buffers and 5000 small kernels: many buffers completed on
               CUPTI's thread, none dropped
  (set NVTX_INJECTION64_PATH to the libcupti path before starting MODE torch: NVTX ranges of
  the work then arrive as MARKER_CORE_API rows)

The script plays both sides: it calls rocprof_attach_cuda_start on a fresh thread (what the
injected trampoline does) and is the front end on an abstract SOCK_SEQPACKET socket. It prints
the replies and a summary of each database (read with sqlite3) and exits 1 on a failed check.

Seen 2026-11-26 on one H100 (driver 580.159.04, CUDA 13.0, PyTorch 2.11.0+cu130, CUPTI API
version 130001 from the nvidia-cu13 wheel): all modes pass. torch: 10 kernels (cutlass sgemm and
a fill kernel, demangled), 5 DtoH copies, 259 API rows on 2 threads, kernels on the Python
thread's tid, timestamps on CLOCK_BOOTTIME, offset bracket about 80 ns, flush under 0.5 ms,
write under 10 ms; kineto: `error cupti-held` from cuptiSubscribe (39) and torch.profiler kept
working; cupy: CUPTI found through the process's nvidia wheel tree and initialised late, records
as in torch; alloc: 6 MEMORY2 rows for 3 cudaMalloc/cudaFree pairs; stress: 5001 kernels and
25018 API rows through 64 KiB buffers, 0 dropped, written in 178 ms; torch with
NVTX_INJECTION64_PATH: the 5 "step" ranges as MARKER_CORE_API rows.
"""
import ctypes
import os
import socket
import sqlite3
import sys
import threading
import time

so, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
fails = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        fails.append(what)


if mode in ("torch", "kineto", "alloc_torch", "stress"):
    import torch

    dev = torch.device("cuda")
    a = torch.randn(2048, 2048, device=dev)

    def work():
        for _ in range(5):
            torch.cuda.nvtx.range_push("step")
            b = a @ a
            b.cpu()
            torch.zeros(1 << 20, device=dev)
            torch.cuda.nvtx.range_pop()
        torch.empty(1 << 26, device=dev)  # a fresh cudaMalloc through the caching allocator
        torch.cuda.synchronize()

else:
    import cupy

    a = cupy.random.rand(2048, 2048, dtype=cupy.float32)

    def work():
        for _ in range(5):
            b = a @ a
            b.get()
            cupy.zeros(1 << 20, dtype=cupy.float32)
        cupy.cuda.Device().synchronize()


work()
maps = open("/proc/self/maps").read()
print("libcupti mapped before attach:", sorted({l.split()[-1] for l in maps.splitlines() if "libcupti" in l}))

fe = "rocprof-fe-test.%d" % os.getpid()
ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
ls.bind("\0" + fe)
ls.listen(1)
lib = ctypes.CDLL(so)
lib.rocprof_attach_cuda_start.argtypes = [ctypes.c_char_p]
payload = ("socket=%s\nversion=1\n" % fe).encode()
threading.Thread(target=lambda: lib.rocprof_attach_cuda_start(payload), daemon=True).start()
ls.settimeout(30)
c, _ = ls.accept()
c.settimeout(120)


def ask(conn, msg):
    conn.send(msg.encode())
    r = conn.recv(1 << 20).decode()
    print(msg.split()[0], "->", r, flush=True)
    return r


def attach_msg(db):
    return (
        "attach\nROCPROF_KERNEL_TRACE=1\nROCPROF_MEMORY_COPY_TRACE=1\nROCPROF_HIP_RUNTIME_API_TRACE=1\n"
        "ROCPROF_ATTACH_CUDA_DRIVER_API=1\nROCPROF_MEMORY_ALLOCATION_TRACE=1\nROCPROF_MARKER_API_TRACE=1\n"
        "ROCPROF_ATTACH_DB=%s\n" % db
    )


def summary(db, tid):
    con = sqlite3.connect(db)
    names = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
    t = lambda base: next(n for n in names if n.startswith(base + "_"))
    k = con.execute("select count(*), count(distinct tid), min(start), max(end) from %s" % t("rocpd_kernel_dispatch")).fetchone()
    syms = [r[0] for r in con.execute("select display_name from %s limit 5" % t("rocpd_info_kernel_symbol"))]
    cp = con.execute("select count(*), sum(size) from %s" % t("rocpd_memory_copy")).fetchone()
    api = con.execute("select count(*), count(distinct tid) from %s" % t("rocpd_region")).fetchone()
    api_tids = [r[0] for r in con.execute("select distinct tid from %s" % t("rocpd_region"))]
    al = con.execute("select count(*) from %s" % t("rocpd_memory_allocate")).fetchone()
    agents = con.execute("select type, name, product_name, vendor_name from %s" % t("rocpd_info_agent")).fetchall()
    proc = con.execute("select extdata from %s" % t("rocpd_info_process")).fetchone()
    print("db", db, "kernels", k, "symbols", syms, "copies", cp, "api", api, api_tids, "allocs", al)
    print("agents", agents)
    print("process extdata", proc[0])
    boot = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    check(k[0] > 0, "kernels recorded")
    check(k[3] is not None and boot - 600e9 < k[3] <= boot, "kernel end on CLOCK_BOOTTIME (%s vs now %d)" % (k[3], boot))
    check(cp[0] > 0, "copies recorded")
    check(api[0] > 0 and tid in api_tids, "API rows carry this thread's kernel tid %d" % tid)
    return k[0]


tid = threading.get_native_id()
if mode == "stress":
    db = os.path.join(out, "stress.db")
    r = ask(c, "attach\nROCPROF_KERNEL_TRACE=1\nROCPROF_HIP_RUNTIME_API_TRACE=1\nROCPROF_ATTACH_BUFFER_BYTES=65536\nROCPROF_ATTACH_DB=%s\n" % db)
    check(r.startswith("ok "), "attach")
    x = torch.ones(16, device=dev)
    for _ in range(5000):
        x.add_(1)
    torch.cuda.synchronize()
    r = ask(c, "detach\n")
    k = int(r.split('"kernels":')[1].split(",")[0].rstrip("}"))
    check(k >= 5000 and '"dropped":0' in r, "5000 kernels (+ the fill of x), none dropped")
elif mode in ("alloc", "alloc_torch"):
    db = os.path.join(out, mode + ".db")
    r = ask(c, "attach\nROCPROF_MEMORY_ALLOCATION_TRACE=1\nROCPROF_KERNEL_TRACE=1\nROCPROF_ATTACH_DB=%s\n" % db)
    check(r.startswith("ok "), "attach")
    if mode == "alloc":
        for _ in range(3):
            p = cupy.cuda.runtime.malloc(1 << 24)
            cupy.cuda.runtime.free(p)
        cupy.cuda.Device().synchronize()
    else:
        torch.cuda.empty_cache()
        x = torch.empty(1 << 26, device=dev)
        del x
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
    r = ask(c, "detach\n")
    check('"allocations":6' in r or '"allocations":2' in r, "allocations recorded")
    con = sqlite3.connect(db)
    names = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
    t = next(n for n in names if n.startswith("rocpd_info_process_"))
    print("process extdata", con.execute("select extdata from %s" % t).fetchone()[0])
elif mode == "kineto":
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
    prof.__enter__()
    work()
    r = ask(c, attach_msg(os.path.join(out, "kineto.db")))
    check(r.startswith("error cupti-held "), "attach refused while torch.profiler holds CUPTI")
    work()
    prof.__exit__(None, None, None)
    print("kineto events", len(prof.events()))
    check(len(prof.events()) > 0, "torch.profiler still works after the refusal")
else:
    db1 = os.path.join(out, mode + "1.db")
    r = ask(c, attach_msg(db1))
    check(r.startswith("ok "), "attach")
    t0 = time.time()
    work()
    r = ask(c, "detach\n")
    check(r.startswith("ok "), "detach")
    summary(db1, tid)
    if os.environ.get("NVTX_INJECTION64_PATH"):
        con = sqlite3.connect(db1)
        names = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
        ev = next(n for n in names if n.startswith("rocpd_event_"))
        st = next(n for n in names if n.startswith("rocpd_string_"))
        n = con.execute("select count(*) from %s e join %s s on s.id = e.category_id where s.string = 'MARKER_CORE_API'" % (ev, st)).fetchone()[0]
        check(n == 5, "5 NVTX ranges as markers (got %d)" % n)
    c.close()
    # A second start finds the tool alive.
    check(lib.rocprof_attach_cuda_start(payload) == 1, "second start returns 1")
    # Session 2 over the tool's own socket, ended by EOF.
    c2 = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c2.connect("\0rocprof-attach-cuda.%d" % os.getpid())
    c2.settimeout(120)
    db2 = os.path.join(out, mode + "2.db")
    r = ask(c2, attach_msg(db2))
    check(r.startswith("ok "), "second attach")
    work()
    c2.close()
    for _ in range(300):
        if os.path.exists(db2) and os.path.getsize(db2) > 0:
            break
        time.sleep(0.1)
    time.sleep(1)
    summary(db2, tid)
    # Nothing stays enabled: work after detach must not grow anything (no crash either).
    work()

print("FAILED:" if fails else "ALL OK", fails)
sys.exit(1 if fails else 0)
