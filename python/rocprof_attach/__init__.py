"""rocprof-attach from Python: attach AMD's GPU profiler to a running process.

The package ships the ``rocprof-attach`` command and the rocattach C library (a drop-in for ROCm's
``librocprofiler-sdk-rocattach.so.1``). This module calls the library through ctypes:

* ``main(pid=None, attach_library=None, duration=None)`` behaves as the function of the same name
  in ROCm's guide "Implementing process attachment tools": ``pid`` defaults to
  ``ROCPROF_ATTACH_PID``, ``attach_library`` (a colon-separated list of tool libraries loaded in
  the target) to ``ROCPROF_ATTACH_TOOL_LIBRARY``, ``duration`` (milliseconds) to
  ``ROCPROF_ATTACH_DURATION``; without a duration it detaches on Enter or SIGINT.
* ``attach(pid)`` / ``detach(pid)`` return rocattach status codes (0 is success; see
  ``status_name``). ``attach(pid, children=True)`` and ``detach(pid, children=True)`` are the tree
  variants.

Every ``ROCP*`` variable of this process's environment at call time is sent to the target, as with
rocprofv3 (e.g. ``os.environ["ROCPROF_KERNEL_TRACE"] = "1"`` before ``attach``).
"""

import ctypes
import glob
import os
import signal
import sys
import time

__all__ = ["main", "attach", "detach", "library_path", "status_name", "status_string"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_LIBS = {}


def library_path():
    """Path of the rocattach library shipped in this package."""
    found = sorted(glob.glob(os.path.join(_HERE, "_rocattach*.so")))
    found += sorted(glob.glob(os.path.join(_HERE, "librocprofiler-sdk-rocattach.so*")))
    if not found:
        raise RuntimeError(
            "the rocattach library is missing from %s: reinstall the package with `pip install .` "
            "from a rocprof-attach checkout" % _HERE
        )
    return found[0]


def _load(path=None):
    path = os.path.abspath(path or library_path())
    lib = _LIBS.get(path)
    if lib is None:
        lib = ctypes.CDLL(path)
        for name in ("rocattach_attach", "rocattach_attach_tree", "rocattach_detach",
                     "rocattach_detach_tree"):
            fn = getattr(lib, name)
            fn.argtypes = [ctypes.c_int]
            fn.restype = ctypes.c_int
        for name in ("rocattach_get_status_name", "rocattach_get_status_string"):
            fn = getattr(lib, name)
            fn.argtypes = [ctypes.c_int]
            fn.restype = ctypes.c_char_p
        _LIBS[path] = lib
    return lib


def attach(pid, children=False, library=None):
    """Attach to ``pid`` (and its descendants with ``children=True``); returns the status code."""
    lib = _load(library)
    fn = lib.rocattach_attach_tree if children else lib.rocattach_attach
    return int(fn(int(pid)))


def detach(pid, children=False, library=None):
    """Detach from ``pid`` (the tree attached with ``children=True``; 0 detaches everything)."""
    lib = _load(library)
    fn = lib.rocattach_detach_tree if children else lib.rocattach_detach
    return int(fn(int(pid)))


def status_name(status, library=None):
    """``ROCATTACH_STATUS_*`` name of a status code (None when out of range)."""
    name = _load(library).rocattach_get_status_name(int(status))
    return name.decode() if name else None


def status_string(status, library=None):
    """Message of a status code (None when out of range)."""
    text = _load(library).rocattach_get_status_string(int(status))
    return text.decode() if text else None


def main(pid=None, attach_library=None, duration=None):
    """Attach to ``pid``, wait ``duration`` ms (or for Enter / SIGINT), detach.

    Returns the detach status (0 on success); raises RuntimeError when the attach fails.
    """
    if pid is None:
        pid = os.environ.get("ROCPROF_ATTACH_PID") or None
    if attach_library is None:
        attach_library = os.environ.get("ROCPROF_ATTACH_TOOL_LIBRARY") or None
    if duration is None:
        duration = os.environ.get("ROCPROF_ATTACH_DURATION") or None
    if pid is None:
        raise RuntimeError("no PID to attach to: pass pid= or set ROCPROF_ATTACH_PID")
    try:
        pid = int(pid)
        duration = None if duration is None else int(duration)
    except ValueError as e:
        raise RuntimeError("invalid PID or duration: %s" % e)
    if attach_library:
        # Read by the library at call time, and sent to the target with the other ROCP* variables.
        os.environ["ROCPROF_ATTACH_TOOL_LIBRARY"] = attach_library
    lib = library_path()
    print("rocprof-attach: Attaching to PID %d using library %s" % (pid, lib), flush=True)
    status = attach(pid)
    if status != 0:
        raise RuntimeError(
            "Calling attach in %s returned non-zero status %d (%s)" % (lib, status, status_name(status))
        )
    print("rocprof-attach: Attaching to PID %d using library %s :: success" % (pid, lib), flush=True)

    def finish():
        print("rocprof-attach: Detaching. Please wait, this can take up to 1-2 minutes", flush=True)
        st = detach(pid)
        if st != 0:
            print("rocprof-attach: Calling detach in %s returned non-zero status %d" % (lib, st),
                  flush=True)
        else:
            print("rocprof-attach: Detaching from PID %d using library %s :: success" % (pid, lib),
                  flush=True)
        return st

    previous = signal.getsignal(signal.SIGINT)

    def on_sigint(signum, frame):
        print("\nCaught signal SIGINT", flush=True)
        signal.signal(signal.SIGINT, previous)
        sys.exit(finish())

    signal.signal(signal.SIGINT, on_sigint)
    try:
        if duration is None:
            sys.stdout.write("Press Enter to detach...")
            sys.stdout.flush()
            try:
                input()
            except EOFError:
                pass
        else:
            print("rocprof-attach: Attaching for %d msec...\n" % duration, flush=True)
            time.sleep(duration / 1000.0)
    finally:
        if signal.getsignal(signal.SIGINT) is on_sigint:
            signal.signal(signal.SIGINT, previous)
    return finish()
