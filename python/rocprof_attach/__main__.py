"""``python -m rocprof_attach``: ``main()`` with its environment defaults, or
``python -m rocprof_attach --library-path`` to print the path of the packaged rocattach library
(e.g. for ``ROCPROF_ATTACH_LIBRARY``).

Exit status: the detach status (0 on success); 2 for a usage error (no PID in
``ROCPROF_ATTACH_PID``, a PID or duration that is not a number, an unknown argument), with the
usage and the reason on stderr; 1 when the attach fails, with one line
``rocprof_attach: error: <reason>``."""

import sys

from . import UsageError, library_path, main

USAGE = (
    "usage: python -m rocprof_attach [--library-path]\n"
    "  attaches with ROCPROF_ATTACH_PID, ROCPROF_ATTACH_TOOL_LIBRARY and ROCPROF_ATTACH_DURATION;\n"
    "  the full command line is the `rocprof-attach` command\n"
)


def _one_line(e):
    return " ".join(str(e).split("\n")).strip() or type(e).__name__


def run(argv):
    if argv == ["--library-path"]:
        print(library_path())
        return 0
    if argv in (["-h"], ["--help"]):
        sys.stdout.write(USAGE)
        return 0
    if argv:
        sys.stderr.write(USAGE)
        sys.stderr.write("rocprof_attach: error: unexpected argument %r\n" % argv[0])
        return 2
    try:
        return int(main())
    except UsageError as e:
        sys.stderr.write(USAGE)
        sys.stderr.write("rocprof_attach: error: %s\n" % _one_line(e))
        return 2
    except RuntimeError as e:
        sys.stderr.write("rocprof_attach: error: %s\n" % _one_line(e))
        return 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
