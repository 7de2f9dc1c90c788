"""``python -m rocprof_attach``: ``main()`` with its environment defaults, or
``python -m rocprof_attach --library-path`` to print the path of the packaged rocattach library
(e.g. for ``ROCPROF_ATTACH_LIBRARY``)."""

import sys

from . import library_path, main

if __name__ == "__main__":
    if sys.argv[1:] == ["--library-path"]:
        print(library_path())
        sys.exit(0)
    if sys.argv[1:]:
        sys.stderr.write(
            "usage: python -m rocprof_attach [--library-path]\n"
            "  attaches with ROCPROF_ATTACH_PID, ROCPROF_ATTACH_TOOL_LIBRARY and ROCPROF_ATTACH_DURATION;\n"
            "  the full command line is the `rocprof-attach` command\n"
        )
        sys.exit(2)
    sys.exit(main())
