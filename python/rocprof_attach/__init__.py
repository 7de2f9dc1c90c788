"""rocprof-attach from Python: attach AMD's GPU profiler to a running process.

The package ships the ``rocprof-attach`` command and the rocattach C library (a drop-in for ROCm's
``librocprofiler-sdk-rocattach.so.1``). This module calls the library through ctypes:

* ``main(pid=None, attach_library=None, duration=None)`` behaves as the function of the same name
  in ROCm's guide "Implementing process attachment tools": ``pid`` defaults to
  ``ROCPROF_ATTACH_PID``, ``attach_library`` (a colon-separated list of tool libraries loaded in
  the target) to ``ROCPROF_ATTACH_TOOL_LIBRARY``, ``duration`` (milliseconds) to
  ``ROCPROF_ATTACH_DURATION``; without a duration it detaches on Enter or SIGINT. It returns the
  detach status as a ``Session`` (an ``int`` that also lists the ``files`` the tool wrote), once
  the tool has written them, and raises ``AttachError`` (a ``RuntimeError``) with the library's
  reason when the attach fails.
* ``attach(pid)`` / ``detach(pid)`` return rocattach status codes (0 is success; see
  ``status_name``); ``last_error()`` is the reason the library gave for the last failed call of
  this thread. ``attach(pid, children=True)`` and ``detach(pid, children=True)`` are the tree
  variants.
* ``convert``, ``summary`` and ``query`` run the packaged ``rocprof-attach`` command on rocpd
  databases and return what it wrote; a failure raises ``CommandError`` with its message.

Every ``ROCP*`` variable of this process's environment at call time is sent to the target, as with
rocprofv3 (e.g. ``os.environ["ROCPROF_KERNEL_TRACE"] = "1"`` before ``attach``).
"""

import ctypes
import glob
import json as _json
import os
import re
import shutil
import socket
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time

__all__ = [
    "main", "attach", "detach", "last_error", "library_path", "status_name", "status_string",
    "convert", "summary", "query", "command_path", "Session", "AttachError", "UsageError",
    "CommandError",
]

_HERE = os.path.dirname(os.path.abspath(__file__))
_LIBS = {}


class UsageError(RuntimeError):
    """``main()`` was called without a PID, or with a PID or duration that is not a number."""


class AttachError(RuntimeError):
    """The attach in ``main()`` failed: ``status`` is the rocattach code, ``reason`` the library's
    message (None when its log was silenced with ``ROCATTACH_LOG_LEVEL``)."""

    def __init__(self, message, status, reason=None):
        RuntimeError.__init__(self, message)
        self.status = status
        self.reason = reason


class CommandError(RuntimeError):
    """``rocprof-attach convert``/``summary``/``query`` failed: ``returncode``, ``stderr`` and
    the command line (``command``) it ran."""

    def __init__(self, command, returncode, stderr):
        text = stderr.strip() or "no message"
        RuntimeError.__init__(
            self, "%s failed with exit status %d: %s" % (" ".join(command[:2]), returncode, text))
        self.command = command
        self.returncode = returncode
        self.stderr = stderr


class Session(int):
    """What ``main()`` returns: the detach status (an ``int``, 0 on success) with ``pid``,
    ``files`` (the files the tool wrote or changed in its output directory during the session, as
    the target sees their paths, sorted) and ``output_dir`` (the directory searched)."""

    def __new__(cls, status, pid, files, output_dir):
        self = int.__new__(cls, status)
        self.status = int(status)
        self.pid = pid
        self.files = list(files)
        self.output_dir = output_dir
        return self


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


# The library reports why a call failed only in its log on stderr (glog-style lines,
# `E0612 14:03:07.123456 4242 rocattach] ROCATTACH: <message>`, see docs/library.md): its C
# interface is exactly rocattach's, with no error-string function. Each call therefore runs with
# file descriptor 2 pointed at a temporary file; the lines are copied to the real stderr as soon
# as the call returns (so the log still shows as before), and its error lines are kept for
# last_error(). One call at a time does this (descriptor 2 belongs to the whole process); what
# other threads write to stderr meanwhile is held back until the call returns, not lost.
_CAPTURE = threading.Lock()
_ERRORS = threading.local()
_LINE = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ rocattach\] ROCATTACH: (.*)$")


def _call(fn, pid):
    with _CAPTURE:
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        try:
            saved = os.dup(2)
        except OSError:
            # No stderr to borrow: the call runs as is, and its reason is unknown.
            _ERRORS.last = None
            return int(fn(pid))
        try:
            with tempfile.TemporaryFile() as log:
                os.dup2(log.fileno(), 2)
                try:
                    status = int(fn(pid))
                finally:
                    os.dup2(saved, 2)
                log.seek(0)
                text = log.read()
        finally:
            os.close(saved)
    if text:
        view = memoryview(text)
        while view:
            try:
                n = os.write(2, view)
            except OSError:
                break
            view = view[n:]
    errors = []
    for line in text.decode("utf-8", "replace").splitlines():
        m = _LINE.match(line)
        if m and m.group(1) in "EF":
            errors.append(m.group(2))
    _ERRORS.last = "\n".join(errors) if status != 0 and errors else None
    return status


def last_error():
    """The reason the rocattach library logged for the last failed ``attach``/``detach`` of this
    thread (its error lines, newline-separated), or None: the last call succeeded, or the log was
    silenced (``ROCATTACH_LOG_LEVEL=fatal`` or ``off``)."""
    return getattr(_ERRORS, "last", None)


def attach(pid, children=False, library=None):
    """Attach to ``pid`` (and its descendants with ``children=True``); returns the status code
    (``last_error()`` says why when it is not 0)."""
    lib = _load(library)
    fn = lib.rocattach_attach_tree if children else lib.rocattach_attach
    return _call(fn, int(pid))


def detach(pid, children=False, library=None):
    """Detach from ``pid`` (the tree attached with ``children=True``; 0 detaches everything)."""
    lib = _load(library)
    fn = lib.rocattach_detach_tree if children else lib.rocattach_detach
    return _call(fn, int(pid))


def status_name(status, library=None):
    """``ROCATTACH_STATUS_*`` name of a status code (None when out of range)."""
    name = _load(library).rocattach_get_status_name(int(status))
    return name.decode() if name else None


def status_string(status, library=None):
    """Message of a status code (None when out of range)."""
    text = _load(library).rocattach_get_status_string(int(status))
    return text.decode() if text else None


# ---------------------------------------------------------------- output files of a session
# As the command does (crates/attach/src/templates.rs and outputs.rs): the output path and file
# name templates are expanded for the target as its tool will expand them (keys whose value
# cannot be known here match any one path component's worth of text), and only the directories
# and files those templates can name are looked at, through the target's root (/proc/PID/root,
# so a target in a container is handled), before the attach and after the detach. Nothing else
# of the working directory is read.
_MAX_DEPTH = 8
_MAX_ENTRIES = 200000
_DEFAULT_OUTPUT_FILE = "%hostname%/%pid%"
_RANK_VARIABLES = ("SLURM_PROCID", "MPI_RANK", "MPI_LOCALRANKID", "MPI_RANKID",
                   "MV2_COMM_WORLD_RANK", "OMPI_COMM_WORLD_RANK")
# Keys the tool knows whose value cannot be known from outside the target.
_UNKNOWABLE = ("size", "s", "psize", "argv", "argt", "args", "launch_date", "launch_time")
_ANY = "\0"


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _facts(pid):
    """What the template keys of process ``pid`` expand to (None: not knowable here)."""
    status = (_read("/proc/%d/status" % pid) or b"").decode(errors="replace")
    nspid = [l.split()[1:] for l in status.splitlines() if l.startswith("NSpid:")]
    nspid = nspid[0] if nspid else []
    nested = len(nspid) != 1
    stat = (_read("/proc/%d/stat" % pid) or b"").decode(errors="replace")
    fields = stat[stat.rfind(")") + 1:].split() if ")" in stat else []

    def field(i):
        return None if nested or len(fields) <= i else fields[i]

    env = {}
    for entry in (_read("/proc/%d/environ" % pid) or b"").split(b"\0"):
        k, sep, v = entry.decode(errors="replace").partition("=")
        if sep:
            env[k] = v
    # What the attach sends over it: our ROCP* variables.
    env.update({k: v for k, v in os.environ.items() if k.startswith("ROCP")})
    try:
        cwd = os.readlink("/proc/%d/cwd" % pid)
        root = os.readlink("/proc/%d/root" % pid)
        cwd = "/" + os.path.relpath(cwd, root) if root != "/" else cwd
        cwd = os.path.normpath(cwd)
    except (OSError, ValueError):
        cwd = None
    try:
        same_uts = os.readlink("/proc/%d/ns/uts" % pid) == os.readlink("/proc/self/ns/uts")
    except OSError:
        same_uts = False
    argv = (_read("/proc/%d/cmdline" % pid) or b"").split(b"\0")
    rank = next((env[v] for v in _RANK_VARIABLES if v in env), None)
    values = {
        "pid": nspid[-1] if nspid else str(pid), "ppid": field(1), "pgid": field(2),
        "psid": field(3), "hostname": socket.gethostname() if same_uts else None, "cwd": cwd,
        "job": env.get("SLURM_JOB_ID", "0"), "rank": rank or "0",
        "nid": env.get("SLURM_PROCID") or rank or (nspid[-1] if nspid else str(pid)),
        "tag": os.path.basename(argv[0].decode(errors="replace")) if argv and argv[0] else None,
    }
    for short, long_ in (("p", "pid"), ("h", "hostname"), ("j", "job"), ("r", "rank")):
        values[short] = values[long_]
    return values, env


def _key(key, values):
    """The value of template key ``key``: text, _ANY when unknowable, None when no key."""
    if key in values:
        v = values[key]
        return _ANY if v is None else v
    if key in _UNKNOWABLE or (key.startswith("arg") and key[3:].isdigit() and len(key) > 3):
        return _ANY
    return None


def _expand_once(text, values, env):
    out, i = [], 0
    while i < len(text):
        for open_, close in (("%env{", "}%"), ("%ENV{", "}%"), ("$env{", "}"), ("$ENV{", "}")):
            if text.startswith(open_, i):
                end = text.find(close, i + len(open_))
                name = text[i + len(open_):end] if end >= 0 else ""
                if name and re.match(r"^[A-Z0-9_]+$", name):
                    v = env.get(name, "").lstrip("\t /")
                    out.append(re.sub(r"[\t /]", "_", v))
                    i = end + len(close)
                    break
        else:
            c = text[i]
            for open_, close in (("%", "%"), ("{", "}")):
                if c == open_:
                    end = text.find(close, i + 1)
                    v = _key(text[i + 1:end], values) if end > i else None
                    if v is not None:
                        out.append(v)
                        i = end + 1
                        break
            else:
                if c == "%" and i + 1 < len(text) and text[i + 1] in "hpjrs":
                    out.append(_key(text[i + 1], values) if text[i + 1] != "s" else _ANY)
                    i += 2
                else:
                    out.append(c)
                    i += 1
    return "".join(out)


def _pattern(pid):
    """(base directory as the target sees it, regexes of the components below it, regex of a
    whole path the tool writes) for the output template of process ``pid``."""
    values, env = _facts(pid)
    path = os.environ.get("ROCPROF_OUTPUT_PATH", "").strip() or "%cwd%"
    name = os.environ.get("ROCPROF_OUTPUT_FILE_NAME", "").strip() or _DEFAULT_OUTPUT_FILE
    text = path.rstrip("/") + "/" + name
    for _ in range(8):
        nxt = _expand_once(text, values, env)
        if nxt == text:
            break
        text = nxt
    if not text.startswith("/"):
        cwd = values["cwd"]
        text = (cwd.rstrip("/") if cwd else _ANY) + "/" + text
    head = text.split(_ANY, 1)[0]
    base = head[:head.rfind("/")] or "/"
    rest = text[len(base):].lstrip("/")

    def rx(part):
        return "[^/]*".join(re.escape(x) for x in part.split(_ANY))

    components = [re.compile("^%s$" % rx(c)) for c in rest.split("/") if c]
    whole = re.compile("^%s(?:$|[_./])" % rx(text))
    return base, components, whole


def _scan(root, base, components, whole):
    """{path relative to ``root``: (size, mtime)} of the files the template names under ``root``
    (``base`` as the target sees it): only directories matching the component at their depth
    are entered; below a name matching the whole template, everything."""
    files = {}
    n = len(components)

    def walk(d, depth, everything):
        if depth > _MAX_DEPTH or len(files) >= _MAX_ENTRIES:
            return
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            rel = os.path.relpath(e.path, root)
            named = everything or (depth + 1 >= n and whole.match(os.path.join(base, rel)))
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if named or (depth + 1 < n and components[depth].match(e.name)):
                    walk(e.path, depth + 1, bool(named))
            elif stat.S_ISREG(st.st_mode) and named:
                files[rel] = (st.st_size, st.st_mtime_ns)
            if len(files) >= _MAX_ENTRIES:
                return

    walk(root, 0, False)
    return files


class _Snapshot(object):
    def __init__(self, pid):
        self.target, self.components, self.whole = _pattern(pid)
        via_proc = "/proc/%d/root%s" % (pid, self.target)
        try:
            os.stat("/proc/%d/root/" % pid)
            self.scan_root = via_proc
        except OSError:
            # /proc/PID/root needs ptrace-level access: our own view (the same mount namespace in
            # the common case).
            self.scan_root = self.target
        self.files = self._scan(self.scan_root)

    def _scan(self, root):
        return _scan(root, self.target, self.components, self.whole)

    def changes(self):
        root = self.scan_root
        if not os.path.isdir(root) and root != self.target and os.path.isdir(self.target):
            # The target exited: its root is gone from /proc; our view is the best left.
            root = self.target
        now = self._scan(root)
        return sorted(os.path.join(self.target, rel) for rel, meta in now.items()
                      if self.files.get(rel) != meta)


def main(pid=None, attach_library=None, duration=None):
    """Attach to ``pid``, wait ``duration`` ms (or for Enter / SIGINT), detach.

    Returns a ``Session``: the detach status (an ``int``, 0 on success) with ``files``, the files
    the tool wrote in its output directory. ``ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC`` is set to 1
    when unset (as the ``rocprof-attach`` command does), so the tool writes its files before the
    detach call returns. Raises ``UsageError`` without a usable PID and ``AttachError`` (with the
    library's reason) when the attach fails; both are ``RuntimeError``.
    """
    if pid is None:
        pid = os.environ.get("ROCPROF_ATTACH_PID") or None
    if attach_library is None:
        attach_library = os.environ.get("ROCPROF_ATTACH_TOOL_LIBRARY") or None
    if duration is None:
        duration = os.environ.get("ROCPROF_ATTACH_DURATION") or None
    if pid is None:
        raise UsageError("no PID to attach to: pass pid= or set ROCPROF_ATTACH_PID")
    try:
        pid = int(pid)
        duration = None if duration is None else int(duration)
    except ValueError as e:
        raise UsageError("invalid PID or duration: %s" % e)
    if attach_library:
        # Read by the library at call time, and sent to the target with the other ROCP* variables.
        os.environ["ROCPROF_ATTACH_TOOL_LIBRARY"] = attach_library
    # The tool writes its output before the detach call returns (rocprofv3's default is later,
    # from a thread of the target): main() then returns with the files complete.
    if not os.environ.get("ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC", "").strip():
        os.environ["ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC"] = "1"
    lib = library_path()
    print("rocprof-attach: Attaching to PID %d using library %s" % (pid, lib), flush=True)
    snapshot = _Snapshot(pid)
    status = attach(pid)
    if status != 0:
        reason = last_error()
        raise AttachError(
            "Calling attach in %s returned non-zero status %d (%s)%s"
            % (lib, status, status_name(status), ": " + reason if reason else ""),
            status, reason)
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
        return Session(st, pid, snapshot.changes(), snapshot.target)

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


# ---------------------------------------------------------------- convert, summary, query
def command_path():
    """Path of the packaged ``rocprof-attach`` command: next to this Python (a venv's bin/), in
    the install scheme's scripts directory, in ``sys.prefix``/bin, else on ``PATH``."""
    name = "rocprof-attach"
    dirs = [os.path.dirname(os.path.abspath(sys.executable)), sysconfig.get_path("scripts"),
            os.path.join(sys.prefix, "bin")]
    for d in dirs:
        if d:
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    found = shutil.which(name)
    if found:
        return found
    raise RuntimeError(
        "the rocprof-attach command was not found next to %s, in %s or on PATH: reinstall the "
        "package (`pip install .` from a rocprof-attach checkout)"
        % (sys.executable, ", ".join(d for d in dirs[1:] if d)))


def _inputs(inputs):
    if isinstance(inputs, (str, bytes)) or hasattr(inputs, "__fspath__"):
        inputs = [inputs]
    out = [os.fsdecode(os.fspath(i)) for i in inputs]
    if not out:
        raise ValueError("no input database given")
    return out


def _options(options):
    """Keyword arguments as command-line options: ``top=25`` is ``--top 25``, ``stats=True`` is
    ``--stats``, False or None leaves the option out, a list gives several values."""
    args = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args.append(flag)
            args.extend(str(v) for v in value)
        else:
            args.extend([flag, os.fsdecode(os.fspath(value)) if hasattr(value, "__fspath__")
                         else str(value)])
    return args


class Output(str):
    """What ``summary`` and ``query`` printed (a ``str``), with ``files`` (the files the command
    wrote) and ``stderr``."""

    def __new__(cls, text, files, stderr):
        self = str.__new__(cls, text)
        self.files = files
        self.stderr = stderr
        return self


def _run(sub, args):
    command = [command_path(), sub] + args
    proc = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True)
    if proc.returncode != 0:
        raise CommandError(command, proc.returncode, proc.stderr)
    wrote = [line[len("rocprof-attach: wrote "):] for line in proc.stderr.splitlines()
             if line.startswith("rocprof-attach: wrote ")]
    return proc, wrote


def _formats(formats):
    if formats is None:
        return []
    if isinstance(formats, str):
        formats = formats.replace(",", " ").split()
    return list(formats)


def convert(inputs, formats=None, output_dir=None, output_name=None, **options):
    """``rocprof-attach convert``: rocpd databases to CSV (default), JSON, Perfetto or OTF2 files.

    ``inputs``: one path or a list (several are merged); ``formats``: a list or a string
    (``"csv json"``); ``output_dir`` (default ``./rocpd-output-data``), ``output_name`` (file
    prefix, default ``out``); other options as keywords (``stats=True``, ``start="25%"``,
    ``kernel_rename=True``, ``agent_index_value="absolute"``, ...). Returns the paths written (an
    empty list when the input holds no records); raises ``CommandError`` on failure.
    """
    args = ["--input"] + _inputs(inputs)
    fmts = _formats(formats)
    if fmts:
        args += ["--output-format"] + fmts
    if output_dir is not None:
        args += ["--output-path", os.fsdecode(os.fspath(output_dir))]
    if output_name is not None:
        args += ["--output-file", str(output_name)]
    proc, _ = _run("convert", args + _options(options))
    return [line for line in proc.stdout.splitlines() if line]


def summary(inputs, formats=None, output_dir=None, output_name=None, json=False, **options):
    """``rocprof-attach summary``: per-kernel, per-API and per-domain statistics.

    Returns the tables as printed (``formats`` default ``console``), as an ``Output`` string
    whose ``files`` lists what file formats (``"csv"``, ``"json"``, ``"md"``, ``"html"``) wrote
    under ``output_dir``; with ``json=True``, the parsed JSON document (docs/json.md). Other
    options as keywords (``top=25``, ``domain_summary=True``, ``summary_by_rank=True``, ...).
    """
    args = ["--input"] + _inputs(inputs)
    fmts = _formats(formats)
    if fmts:
        args += ["--format"] + fmts
    if output_dir is not None:
        args += ["--output-path", os.fsdecode(os.fspath(output_dir))]
    if output_name is not None:
        args += ["--output-file", str(output_name)]
    if json:
        args.append("--json")
    proc, wrote = _run("summary", args + _options(options))
    if json:
        return _json.loads(proc.stdout)
    return Output(proc.stdout, wrote, proc.stderr)


def query(inputs, sql=None, format=None, output_file=None, script=None, **options):
    """``rocprof-attach query``: SQL over the rocpd views of one or many databases.

    Without ``format``, returns the rows as a list of dicts; with ``format`` (``"console"``,
    ``"csv"``, ``"json"``, ``"md"``, ``"html"``), the text as printed (an ``Output`` string).
    ``output_file`` writes the result there instead (returns an ``Output`` with ``files``);
    ``script`` is a file of SQL statements run first. Window options as keywords
    (``start="25%"``, ``end_marker="step"``, ``inclusive=True``).
    """
    if sql is None and script is None:
        raise ValueError("pass sql= or script=")
    args = ["--input"] + _inputs(inputs)
    if sql is not None:
        args += ["--query", sql]
    if script is not None:
        args += ["--script", os.fsdecode(os.fspath(script))]
    args += ["--format", format or "json"]
    if output_file is not None:
        args += ["--output-file", os.fsdecode(os.fspath(output_file))]
    proc, wrote = _run("query", args + _options(options))
    if format is None and output_file is None:
        return _json.loads(proc.stdout)
    return Output(proc.stdout, wrote, proc.stderr)
